import Foundation
import UpshiftWire

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How an app talks to Upshift. Only `appId`, `platform`, `ingestKey`, `baseURL` and `storageDirectory`
/// are required; the app's version, build, OS version and locale come from the bundle and the system
/// where they are available, and can be set explicitly (tests, and platforms without a bundle).
public struct UpshiftConfiguration: Sendable {
    public var appId: String
    /// `ios`, `android`, … as the app's releases are registered.
    public var platform: String
    /// An ingest key of the app: public, it may only post events.
    public var ingestKey: String
    /// The server, e.g. `https://upshift.example.com`.
    public var baseURL: URL
    /// Where the SDK keeps its state and its event queue (created when missing).
    public var storageDirectory: URL

    /// From the bundle unless given (`CFBundleShortVersionString`).
    public var appVersion: String
    /// `CFBundleVersion` when it is an integer; otherwise left out.
    public var build: Int?
    /// The OS version; left out on Mac Catalyst and for iOS apps on a Mac (a macOS version is no iOS one).
    public var osVersion: String?
    /// A BCP 47 tag `lang[-Script][-REGION]`: the app's interface language with the device's region
    /// (``DeviceFacts/locale(appLanguage:deviceLocale:)``); a given one is reduced the same way.
    public var locale: String?
    public var channel: Channel = .live
    /// The app's App Store id (`1234567890`): where "Update" goes when a decision carries no `updateURL`.
    public var appStoreId: String?

    /// How long `check()` waits for the server before it answers from what it stored.
    public var checkTimeout: Duration = .seconds(3)
    /// How often queued events are sent (also on `flush()` and when the app goes to the background).
    public var flushInterval: Duration = .seconds(30)
    /// Events per request (the server takes at most 500).
    public var batchSize = 100
    /// Events kept on disk at most; beyond it the oldest are dropped, and counted.
    public var queueCapacity = 1_000
    public var retry = RetryPolicy()

    /// Debug builds record nothing and send checks without the install id (they are not real users),
    /// unless this is true. SwiftUI previews never send anything.
    public var sendFromDebugBuilds = false
    /// Whether this is a debug build (`DEBUG` set when the package was compiled, as Xcode does for the
    /// Debug configuration) and whether it runs in an Xcode preview; tests set them.
    public var isDebugBuild = UpshiftConfiguration.compiledForDebug
    public var isPreview = ApplePlatform.isPreview
    /// Whether this process is an app extension (its bundle is an `.appex`; tests set it). An extension
    /// has a container of its own, so it makes no install id: it checks without one and records nothing,
    /// unless the app shares its install id (``sharedInstallIdDirectory``).
    public var isAppExtension = ApplePlatform.isAppExtension
    /// A directory the app and its extensions share (an App Group container, from
    /// `FileManager.containerURL(forSecurityApplicationGroupIdentifier:)`). The app writes its install id
    /// there; an extension reads it and records its events under the app's install.
    public var sharedInstallIdDirectory: URL?

    /// The clock of decisions, reminders and event times; tests pass one they control.
    public var clock: any WallClock = SystemClock()
    /// How requests travel; tests pass one that fails or stalls on purpose.
    public var transport: any UpshiftTransport = URLSessionTransport()
    /// Where the SDK keeps its files; tests pass one that fails as a locked device does.
    public var fileSystem: any UpshiftFileSystem = DeviceFileSystem()
    /// Where the SDK says what it dropped or retries (standard error by default).
    public var log: @Sendable (String) -> Void = { message in
        FileHandle.standardError.write(Data("Upshift: \(message)\n".utf8))
    }

    public init(
        appId: String, platform: String, ingestKey: String, baseURL: URL, storageDirectory: URL,
        appVersion: String? = nil, build: Int? = nil, osVersion: String? = nil, locale: String? = nil
    ) {
        self.appId = appId
        self.platform = platform
        self.ingestKey = ingestKey
        self.baseURL = baseURL
        self.storageDirectory = storageDirectory
        let info = Bundle.main.infoDictionary ?? [:]
        self.appVersion = appVersion ?? (info["CFBundleShortVersionString"] as? String) ?? "0.0.0"
        bundleBuild = info["CFBundleVersion"] as? String
        self.build = build ?? DeviceFacts.build(bundleBuild)
        let os = ProcessInfo.processInfo.operatingSystemVersion
        self.osVersion =
            osVersion
            ?? DeviceFacts.osVersion(
                major: os.majorVersion, minor: os.minorVersion, patch: os.patchVersion, runtime: .current)
        self.locale =
            if let locale { DeviceFacts.locale(locale) } else {
                DeviceFacts.locale(
                    appLanguage: Bundle.main.preferredLocalizations.first, deviceLocale: Locale.current.identifier)
            }
    }

    /// `CFBundleVersion` as the bundle has it: when it is no integer, `build` is left out (and logged).
    var bundleBuild: String?
}

extension UpshiftConfiguration {
    static var compiledForDebug: Bool {
        #if DEBUG
            return true
        #else
            return false
        #endif
    }

    /// Whether events and install ids leave the device from this build.
    var sendsFromThisBuild: Bool {
        !isPreview && (!isDebugBuild || sendFromDebugBuilds)
    }
}

/// Exponential backoff with jitter for events that could not be sent (network errors, `429`, `5xx`).
public struct RetryPolicy: Sendable {
    /// The first delay; each failure doubles it, up to `maximumDelay`.
    public var initialDelay: Duration = .seconds(2)
    public var maximumDelay: Duration = .seconds(300)

    public init(initialDelay: Duration = .seconds(2), maximumDelay: Duration = .seconds(300)) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
    }

    /// The delay after `failures` failures in a row: the doubled delay scaled by a random factor in
    /// [0.5, 1], so that a fleet that failed together does not retry together. A `Retry-After` the
    /// server sent wins when it is longer.
    func delay(after failures: Int, retryAfter: Duration?, random: Double) -> Duration {
        let doubled = initialDelay * (1 << min(max(failures - 1, 0), 20))
        let capped = min(doubled, maximumDelay)
        let jittered = capped * (0.5 + 0.5 * random)
        guard let retryAfter else { return jittered }
        return max(jittered, retryAfter)
    }
}

