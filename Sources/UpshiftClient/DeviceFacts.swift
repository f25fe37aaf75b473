/// What the SDK tells the server about the device, reduced to what the server accepts. Pure functions of
/// what the system reports, so that every rule is tested on Linux; the Apple adapter only passes the
/// system's values in (``DeviceFacts/Runtime/current``).
public enum DeviceFacts {
    /// How the app runs: an iOS app on a Mac reports the Mac's OS version, which is no iOS version.
    public enum Runtime: Sendable, Equatable {
        case native
        /// Built with Mac Catalyst.
        case macCatalyst
        /// An iPhone or iPad app running on an Apple silicon Mac.
        case iOSAppOnMac
    }

    /// The BCP 47 tag `lang[-Script][-REGION]` of a locale identifier as Apple and others spell it
    /// (`en_JP@calendar=japanese` → `en-JP`, `zh-Hans_CN` → `zh-Hans-CN`, `es_419` → `es-419`): ICU keywords
    /// after `@` and variants are dropped, the language is lowercased, the script titlecased, the region
    /// uppercased. Nil for an identifier without a language of 2–8 letters (`""`, `_US`).
    public static func locale(_ identifier: String) -> String? {
        let tag = identifier.prefix { $0 != "@" }
        var parts = tag.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "-" || $0 == "_" })[...]
        guard let language = parts.popFirst(), (2...8).contains(language.count), language.allSatisfy(isLetter) else {
            return nil
        }
        var result = language.lowercased()
        if let script = parts.first, script.count == 4, script.allSatisfy(isLetter) {
            result += "-" + script.prefix(1).uppercased() + script.dropFirst().lowercased()
            parts.removeFirst()
        }
        if let region = parts.first,
            (region.count == 2 && region.allSatisfy(isLetter)) || (region.count == 3 && region.allSatisfy(isDigit))
        {
            result += "-" + region.uppercased()
        }
        return result
    }

    /// The locale to send: the language the app shows its interface in (its preferred localization, e.g.
    /// `de` or `zh-Hans`) with the device's region when that language names none; the device locale alone
    /// when the app's language is unknown. Nil when neither gives a tag.
    public static func locale(appLanguage: String?, deviceLocale: String) -> String? {
        let device = locale(deviceLocale)
        // `Base` is Xcode's development localization, no language.
        guard let app = appLanguage.flatMap(locale), appLanguage != "Base" else { return device }
        guard region(of: app) == nil, let region = device.flatMap(region) else { return app }
        return app + "-" + region
    }

    /// The region subtag of a tag ``locale(_:)`` made: the subtag after the language that is no script.
    private static func region(of tag: String) -> Substring? {
        tag.split(whereSeparator: { $0 == "-" }).dropFirst().first { $0.count != 4 }
    }

    /// The OS version to send: none when the app runs on a Mac as an iOS app (the server compares it with
    /// the iOS versions of releases).
    public static func osVersion(major: Int, minor: Int, patch: Int, runtime: Runtime) -> String? {
        runtime == .native ? "\(major).\(minor).\(patch)" : nil
    }

    /// The integer `build` of a bundle version (`CFBundleVersion`): nil for one that is not a non-negative
    /// integer the server accepts (`1.2.3`, `42b`), which is then left out.
    public static func build(_ bundleVersion: String?) -> Int? {
        guard let bundleVersion, !bundleVersion.isEmpty, bundleVersion.utf8.count <= 16,
            bundleVersion.allSatisfy(isDigit), let value = Int(bundleVersion), value <= 9_007_199_254_740_991
        else { return nil }
        return value
    }

    private static func isLetter(_ character: Character) -> Bool {
        character.isASCII && character.isLetter
    }

    private static func isDigit(_ character: Character) -> Bool {
        character.isASCII && character.isNumber
    }
}
