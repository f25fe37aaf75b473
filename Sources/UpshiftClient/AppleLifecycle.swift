import Foundation

#if os(iOS) || os(tvOS) || os(visionOS)
    import UIKit
#elseif os(macOS)
    import AppKit
#elseif os(watchOS)
    import WatchKit
#endif

// Apple-only lines (listed in docs/SDK.md under "Compiled only on Apple"): the system's lifecycle
// notifications fed to `Upshift.follow(_:whileInBackground:)`, which holds the logic.
#if os(iOS) || os(tvOS) || os(visionOS) || os(macOS) || os(watchOS)
    extension Upshift {
        /// Follows the app's lifecycle as the system reports it: a check on returning to the foreground, a
        /// flush on going to the background (in a background task on iOS). Runs until its task is cancelled.
        /// Sessions are tracked (`abnormal_exit`) on iOS, tvOS, visionOS and watchOS, where an app goes to
        /// the background before the system ends it; an app launched in the background starts so. Not on
        /// macOS, where an app quits from the foreground. Unavailable in app extensions, which have no
        /// `UIApplication.shared`: an extension's host app follows its own lifecycle.
        @available(iOSApplicationExtension, unavailable)
        @available(tvOSApplicationExtension, unavailable)
        @available(visionOSApplicationExtension, unavailable)
        @available(macCatalystApplicationExtension, unavailable)
        public nonisolated func followSystemLifecycle() async {
            let (events, continuation) = AsyncStream.makeStream(of: AppLifecycleEvent.self)
            let names: [(Notification.Name, AppLifecycleEvent)] = Self.lifecycleNotifications
            let watchers = names.map { name, event in
                Task {
                    for await _ in NotificationCenter.default.notifications(named: name) { continuation.yield(event) }
                }
            }
            #if os(iOS) || os(tvOS) || os(visionOS)
                let tracksSessions = true
                if await MainActor.run(body: { UIApplication.shared.applicationState == .background }) {
                    continuation.yield(.background)
                }
            #elseif os(watchOS)
                let tracksSessions = true
                if await MainActor.run(body: { WKApplication.shared().applicationState == .background }) {
                    continuation.yield(.background)
                }
            #else
                let tracksSessions = false
            #endif
            await withTaskCancellationHandler {
                await follow(events, tracksSessions: tracksSessions, whileInBackground: Self.inBackgroundTask)
            } onCancel: {
                for watcher in watchers { watcher.cancel() }
                continuation.finish()
            }
        }

        private static var lifecycleNotifications: [(Notification.Name, AppLifecycleEvent)] {
            #if os(iOS) || os(tvOS) || os(visionOS)
                [(UIApplication.willEnterForegroundNotification, .foreground), (UIApplication.didEnterBackgroundNotification, .background)]
            #elseif os(macOS)
                [(NSApplication.didBecomeActiveNotification, .foreground), (NSApplication.didResignActiveNotification, .background)]
            #else
                [(WKApplication.willEnterForegroundNotification, .foreground), (WKApplication.didEnterBackgroundNotification, .background)]
            #endif
        }

        /// The flush in a UIKit background task that ends (and cancels the flush) when the system says time
        /// is up, so that the app is suspended rather than killed (`BackgroundTime` holds the rule).
        @available(iOSApplicationExtension, unavailable)
        @available(tvOSApplicationExtension, unavailable)
        @available(visionOSApplicationExtension, unavailable)
        @available(macCatalystApplicationExtension, unavailable)
        @Sendable private static func inBackgroundTask(_ work: @escaping @Sendable () async -> Void) async {
            #if os(iOS) || os(visionOS)
                await BackgroundTime.run(
                    begin: { expired in
                        UIApplication.shared.beginBackgroundTask(withName: "Upshift flush") { expired() }
                    },
                    end: { task in UIApplication.shared.endBackgroundTask(task) },
                    work)
            #else
                await work()
            #endif
        }
    }
#endif
