import Foundation

// Apple-only lines (listed in docs/SDK.md under "Compiled only on Apple"). Elsewhere these do nothing.

extension DeviceFacts.Runtime {
    /// Which runtime this process is.
    static var current: Self {
        #if targetEnvironment(macCatalyst)
            return .macCatalyst
        #elseif os(iOS)
            return ProcessInfo.processInfo.isiOSAppOnMac ? .iOSAppOnMac : .native
        #else
            return .native
        #endif
    }
}

enum ApplePlatform {
    /// Files readable once the device was unlocked after a restart (a background launch before that finds
    /// them unavailable, and the SDK waits).
    static var fileProtection: Data.WritingOptions {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
            return .completeFileProtectionUntilFirstUserAuthentication
        #else
            return []
        #endif
    }

    /// Keeps a file out of iCloud and device backups (the install id: a restore onto another device must
    /// not clone the install).
    static func excludeFromBackup(_ url: URL) {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS) || os(macOS)
            var url = url
            var values = URLResourceValues()
            values.isExcludedFromBackup = true
            try? url.setResourceValues(values)
        #endif
    }

    /// True in an app extension (a widget, a notification service …): its bundle is an `.appex`.
    static var isAppExtension: Bool {
        Bundle.main.bundleURL.pathExtension == "appex"
    }

    /// True in an Xcode SwiftUI preview: nothing is sent from previews.
    static var isPreview: Bool {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS) || os(macOS)
            return ProcessInfo.processInfo.environment["XCODE_RUNNING_FOR_PREVIEWS"] == "1"
        #else
            return false
        #endif
    }
}
