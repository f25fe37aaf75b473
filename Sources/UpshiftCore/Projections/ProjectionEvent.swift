import Foundation

/// A place in the gap-free feed: the (`tx_id`, `position`) of an event (docs/ARCHITECTURE.md, "The
/// gap-free feed").
public struct FeedPosition: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// `xid8` as a 64-bit number (it travels as text).
    public var transaction: UInt64
    public var position: Int64

    public static let start = FeedPosition(transaction: 0, position: 0)

    public init(transaction: UInt64, position: Int64) {
        self.transaction = transaction
        self.position = position
    }

    public static func < (lhs: FeedPosition, rhs: FeedPosition) -> Bool {
        (lhs.transaction, lhs.position) < (rhs.transaction, rhs.position)
    }

    public var description: String { "\(transaction)/\(position)" }
}

/// An event as the projections read it from the feed: the fixed columns, plus the few `data` fields
/// they use (extracted by the database), plus the whole `data` of catalog events.
public struct ProjectionEvent: Sendable, Equatable {
    public var feedPosition: FeedPosition
    public var id: UUID
    public var occurredAt: Date
    public var recordedAt: Date
    public var appId: AppID
    public var type: String
    public var installId: UUID?
    public var platform: String?
    public var appVersion: String?
    public var osVersion: String?
    public var locale: String?
    public var promptKind: String?
    public var targetVersion: String?
    public var dismissAction: String?
    /// The channel a `checked` event was asked for (`live` when it was recorded before the channel was).
    public var channel: String?
    /// `data` as JSON text, for catalog events only.
    public var catalogData: String?

    public init(
        feedPosition: FeedPosition, id: UUID, occurredAt: Date, recordedAt: Date, appId: AppID, type: String,
        installId: UUID? = nil, platform: String? = nil, appVersion: String? = nil, osVersion: String? = nil,
        locale: String? = nil, promptKind: String? = nil, targetVersion: String? = nil, dismissAction: String? = nil,
        channel: String? = nil, catalogData: String? = nil
    ) {
        self.feedPosition = feedPosition
        self.id = id
        self.occurredAt = occurredAt
        self.recordedAt = recordedAt
        self.appId = appId
        self.type = type
        self.installId = installId
        self.platform = platform
        self.appVersion = appVersion
        self.osVersion = osVersion
        self.locale = locale
        self.promptKind = promptKind
        self.targetVersion = targetVersion
        self.dismissAction = dismissAction
        self.channel = channel
        self.catalogData = catalogData
    }

    /// The types of events without an install that projections pass over: the catalog's, and the mark of
    /// an erasure.
    public static let typesWithoutInstall: [String] =
        CatalogEvent.Kind.allCases.map(\.rawValue) + [ServerEventType.installForgotten.rawValue]

    /// The install's event as a projection may count it: an install id, a platform and a valid version.
    /// Events of ``typesWithoutInstall`` yield nil; a client event without them is an error the projection
    /// cannot apply (it goes to the dead letters).
    func installFacts(_ versions: inout VersionCache) throws(ProjectionError)
        -> (install: UUID, platform: Platform, version: ParsedVersion)?
    {
        guard let install = installId else {
            if Self.typesWithoutInstall.contains(type) { return nil }
            throw ProjectionError("event has no installId")
        }
        guard let platform = platform.flatMap(Platform.init(validating:)) else {
            throw ProjectionError("event has no platform")
        }
        guard let text = appVersion, let version = versions.parse(text) else {
            throw ProjectionError("appVersion \(appVersion.map { "'\($0)'" } ?? "is missing") is not a version")
        }
        return (install, platform, version)
    }
}

/// A version with the spellings projections store: the report spelling and the sort key.
public struct ParsedVersion: Sendable, Equatable {
    public var value: Version
    public var normalized: String
    public var sortKey: String
}

/// Parses each distinct version string once: a batch has thousands of events and a handful of versions.
public struct VersionCache: Sendable {
    private var known: [String: ParsedVersion?] = [:]

    public init() {}

    public mutating func parse(_ text: String) -> ParsedVersion? {
        if let cached = known[text] { return cached }
        let parsed = Version(text).map { ParsedVersion(value: $0, normalized: $0.normalized, sortKey: $0.sortKey) }
        known[text] = .some(parsed)
        return parsed
    }
}

/// Why a projection could not apply an event.
public struct ProjectionError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// An event a projection could not apply, with the reason: it is stored and the checkpoint moves on.
public struct DeadLetter: Sendable, Equatable {
    public var event: ProjectionEvent
    public var error: String

    public init(event: ProjectionEvent, error: String) {
        self.event = event
        self.error = error
    }
}
