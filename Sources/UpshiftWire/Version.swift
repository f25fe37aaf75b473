/// An app or OS version as docs/ARCHITECTURE.md defines it ("Versions"): `N(.N)*` with 1 to 6 numeric
/// components, an optional `-prerelease` and an optional `+build`.
///
/// Ordering and equality follow its rules: numeric components compare numerically with
/// missing components read as 0 (`1.0 == 1.0.0`), a pre-release ranks below its release and
/// compares by SemVer 2.0 §11, and `+build` metadata is ignored.
public struct Version: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// What a version looks like, for error messages.
    public static let syntax = "1 to 6 numbers joined by dots, optionally -prerelease and +build, such as 2.4.1"

    /// The largest value one numeric component may hold.
    public static let maximumComponent = 999_999_999
    /// The most numeric components a version may have.
    public static let maximumComponentCount = 6
    /// The longest version string accepted (numeric part, pre-release and build together).
    public static let maximumLength = 64

    /// The text as it was written (kept for display and for rollout bucketing: docs/ARCHITECTURE.md, "The
    /// decision rules", step 4).
    public let text: String
    /// Numeric components with trailing zeros removed, so that equal versions have equal arrays.
    public let components: [Int]
    /// Pre-release identifiers (`beta.2` → `["beta", "2"]`); empty for a release.
    public let prerelease: [String]

    /// Parses `text`, returning nil for anything the version rules call invalid (docs/ARCHITECTURE.md,
    /// "Versions"). Never coerces.
    public init?(_ text: String) {
        guard !text.isEmpty, text.utf8.count <= Self.maximumLength else { return nil }
        var rest = Substring(text)
        // `+build` is metadata: validate its identifiers, then drop it.
        if let plus = rest.firstIndex(of: "+") {
            let build = rest[rest.index(after: plus)...]
            guard Self.validIdentifiers(build) else { return nil }
            rest = rest[..<plus]
        }
        var prerelease: [String] = []
        if let dash = rest.firstIndex(of: "-") {
            let pre = rest[rest.index(after: dash)...]
            guard Self.validIdentifiers(pre) else { return nil }
            // Numeric identifiers compare numerically (SemVer §11.4.1): keep them without leading zeros,
            // so that `beta.01` and `beta.1` are one version.
            prerelease = pre.split(separator: ".", omittingEmptySubsequences: false).map { identifier in
                UInt64(identifier).map(String.init) ?? String(identifier)
            }
            rest = rest[..<dash]
        }
        // 1 to 6 components of 1 to 12 ASCII digits, each at most maximumComponent, read in one pass
        // (the ingestion path reads two versions per event).
        var numbers: [Int] = []
        numbers.reserveCapacity(Self.maximumComponentCount)
        var (value, digits) = (0, 0)
        for byte in rest.utf8 {
            if byte == UInt8(ascii: ".") {
                guard digits > 0, value <= Self.maximumComponent, numbers.count < Self.maximumComponentCount - 1 else { return nil }
                numbers.append(value)
                (value, digits) = (0, 0)
            } else {
                guard byte >= 0x30, byte <= 0x39, digits < 12 else { return nil }
                value = value * 10 + Int(byte - 0x30)
                digits += 1
            }
        }
        guard digits > 0, value <= Self.maximumComponent else { return nil }
        numbers.append(value)
        while numbers.count > 1, numbers.last == 0 { numbers.removeLast() }
        if numbers == [0] { numbers = [] }
        self.text = text
        self.components = numbers
        self.prerelease = prerelease
    }

    public var description: String { text }

    /// One spelling per equality class (`1.2.0` → `1.2`, `1.2+7` → `1.2`), used as a key where versions
    /// must be unique by version equality (one release per platform per version: docs/ARCHITECTURE.md,
    /// "Versions").
    public var canonical: String {
        let numeric = components.isEmpty ? "0" : components.map(String.init).joined(separator: ".")
        return prerelease.isEmpty ? numeric : numeric + "-" + prerelease.joined(separator: ".")
    }

    /// The spelling reports use: one per equality class, with at least three numeric components
    /// (`1.2` and `1.2.0+7` → `1.2.0`, `1.2.3.4` stays), then the pre-release.
    public var normalized: String {
        var numbers = components
        while numbers.count < 3 { numbers.append(0) }
        let numeric = numbers.map(String.init).joined(separator: ".")
        return prerelease.isEmpty ? numeric : numeric + "-" + prerelease.joined(separator: ".")
    }

    /// A string whose byte order (`COLLATE "C"`) is this version order, so that the database can sort
    /// and compare versions: six 9-digit components, then `~` for a release or `!` and the pre-release
    /// identifiers (numeric ones length-prefixed, each after `!`, which sorts below every identifier byte).
    public var sortKey: String {
        var key = ""
        key.reserveCapacity(64)
        for index in 0..<Self.maximumComponentCount {
            let digits = String(component(at: index))
            key += String(repeating: "0", count: 9 - digits.utf8.count) + digits
        }
        guard !prerelease.isEmpty else { return key + "~" }
        for identifier in prerelease {
            if UInt64(identifier) != nil {
                let length = identifier.utf8.count
                key += "!0" + (length < 10 ? "0" : "") + String(length) + identifier
            } else {
                key += "!1" + identifier
            }
        }
        return key
    }

    /// The numeric component at `index`, 0 when the version has fewer.
    public func component(at index: Int) -> Int {
        index < components.count ? components[index] : 0
    }

    public static func == (lhs: Version, rhs: Version) -> Bool {
        lhs.components == rhs.components && lhs.prerelease == rhs.prerelease
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(components)
        hasher.combine(prerelease)
    }

    public static func < (lhs: Version, rhs: Version) -> Bool {
        let count = max(lhs.components.count, rhs.components.count)
        for index in 0..<count {
            let (a, b) = (lhs.component(at: index), rhs.component(at: index))
            if a != b { return a < b }
        }
        // Equal numeric parts: a pre-release ranks below its release (SemVer §11.3).
        switch (lhs.prerelease.isEmpty, rhs.prerelease.isEmpty) {
        case (true, _): return false
        case (false, true): return true
        case (false, false): return Self.prereleaseLess(lhs.prerelease, rhs.prerelease)
        }
    }

    /// The kind of update from `installed` to `target` (docs/ARCHITECTURE.md, "Versions"): the index of
    /// the first differing numeric component, or nil when the numeric components are equal.
    public static func updateType(from installed: Version, to target: Version) -> UpdateType? {
        let count = max(installed.components.count, target.components.count)
        for index in 0..<count where installed.component(at: index) != target.component(at: index) {
            switch index {
            case 0: return .major
            case 1: return .minor
            case 2: return .patch
            default: return .revision
            }
        }
        return nil
    }

    // SemVer §11.4: identifiers compare left to right; numeric ones numerically and below
    // alphanumeric ones; a shorter list ranks lower when all before are equal.
    private static func prereleaseLess(_ lhs: [String], _ rhs: [String]) -> Bool {
        for (a, b) in zip(lhs, rhs) where a != b {
            switch (UInt64(a), UInt64(b)) {
            case let (x?, y?): return x < y
            case (.some, nil): return true
            case (nil, .some): return false
            case (nil, nil): return a < b  // ASCII order
            }
        }
        return lhs.count < rhs.count
    }

    private static func validIdentifiers(_ text: Substring) -> Bool {
        guard !text.isEmpty else { return false }
        for identifier in text.split(separator: ".", omittingEmptySubsequences: false) {
            guard !identifier.isEmpty else { return false }
            let allowed = identifier.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == 0x2D
            }
            guard allowed else { return false }
        }
        return true
    }
}

/// The kind of update between two versions (docs/ARCHITECTURE.md, "Versions").
public enum UpdateType: String, Sendable, Codable {
    case major, minor, patch, revision
}

extension Version: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let version = Version(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "invalid version \(text)")
        }
        self = version
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}
