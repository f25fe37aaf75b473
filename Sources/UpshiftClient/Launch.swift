import UpshiftWire

/// A step that brings the app's data to `version`: run once, in version order, on the first launch at or
/// after it, even when versions in between were skipped.
public struct MigrationStep: Sendable {
    public var version: Version
    public var run: @Sendable () async throws -> Void

    public init(version: Version, _ run: @escaping @Sendable () async throws -> Void) {
        self.version = version
        self.run = run
    }

    /// `version` spelled as text: a literal the app writes (`"2.0"`). A text that is no version stops the
    /// app at once in debug builds; in release builds the step never runs and `launch` reports it.
    public init(version: String, _ run: @escaping @Sendable () async throws -> Void) {
        if let parsed = Version(version) {
            self.init(version: parsed, run)
        } else {
            assertionFailure("MigrationStep: \(version) is not a version")
            self.init(version: Version("0")!) { throw InvalidStepVersion(text: version) }
        }
    }
}

struct InvalidStepVersion: Error, CustomStringConvertible {
    let text: String
    var description: String { "\(text) is not a version" }
}

/// What an install without any SDK state is: a new install, or an app that ran before the SDK came
/// (the first release that ships the SDK finds every existing user so).
public enum Baseline: Sendable {
    /// Nothing of an earlier version: no step runs, the running version is the data's version.
    case freshInstall
    /// The app's data is at `version`: the steps after it run, and an update from it is recorded.
    case existingData(version: String)
    /// Ask the app: it looks at its own data (a database's schema version, a file) and answers one of the
    /// two above, or nil when it cannot tell (then no step runs and none is marked done).
    case inspect(@Sendable () async -> Baseline?)
}

/// What `launch` found and did.
public struct LaunchReport: Sendable, Equatable {
    /// The version the app was updated from, when this is the first launch of a new version.
    public var updatedFrom: String?
    /// The migration steps that ran to completion in this launch, in order.
    public var stepsRun: [String] = []
    /// The step that threw (it runs again on the next launch) and its error.
    public var stepFailed: String?
    public var stepError: String?
    /// A step found under way at launch: the previous launch ended while it ran (a crash, a kill).
    public var stepInterrupted: String?
    /// A step interrupted so often that it is no longer started (no crash loop): the steps stop there.
    public var stepAbandoned: String?
    /// The data's version is unknown (no SDK state and a baseline that cannot tell, or a state file
    /// that could not be read): no step ran and none is marked done.
    public var dataVersionUnknown = false
    /// The SDK's files could not be read (a locked device): nothing ran; `launch` completes on its own
    /// when they can be read again, and `lastLaunch` then has that report.
    public var storageUnavailable = false

    public init() {}
}
