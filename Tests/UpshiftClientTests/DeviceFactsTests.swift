import Foundation
import Testing

@testable import UpshiftClient

/// What the SDK sends about the device is what the server accepts (its live acceptance is tested in
/// `UpshiftServerTests/ClientSDKTests`).
@Suite struct DeviceFactsTests {
    /// Locale identifiers as Apple devices and other platforms report them.
    static let identifiers: [(String, String?)] = [
        ("en_JP@calendar=japanese", "en-JP"),
        ("en_US@rg=gbzzzz", "en-US"),
        ("ar_SA@numbers=latn", "ar-SA"),
        ("zh-Hans_CN", "zh-Hans-CN"),
        ("es_419", "es-419"),
        ("sr-Latn_RS", "sr-Latn-RS"),
        ("ca_ES_VALENCIA", "ca-ES"),
        ("EN_us", "en-US"),
        ("de", "de"),
        ("zh_Hant_TW@collation=stroke;calendar=roc", "zh-Hant-TW"),
        ("", nil),
        ("_US", nil),
        ("@calendar=japanese", nil),
        ("e1_US", nil),
    ]

    @Test(arguments: identifiers)
    func localeIdentifiersBecomeTagsTheServerAccepts(_ identifier: String, _ tag: String?) {
        let resolved = DeviceFacts.locale(identifier)
        #expect(resolved == tag)
        if let resolved {
            #expect(resolved.utf8.count <= 35)
            #expect(!resolved.contains("@") && !resolved.contains("_"))
        }
    }

    @Test func theAppsLanguageComesFirstWithTheDevicesRegion() {
        #expect(DeviceFacts.locale(appLanguage: "de", deviceLocale: "en_AT") == "de-AT")
        #expect(DeviceFacts.locale(appLanguage: "zh-Hans", deviceLocale: "zh_CN@calendar=chinese") == "zh-Hans-CN")
        // The app's language carries its own region: the device's does not replace it.
        #expect(DeviceFacts.locale(appLanguage: "en-GB", deviceLocale: "de_DE") == "en-GB")
        #expect(DeviceFacts.locale(appLanguage: nil, deviceLocale: "fr_FR@rg=bezzzz") == "fr-FR")
        #expect(DeviceFacts.locale(appLanguage: "Base", deviceLocale: "fr_FR") == "fr-FR")
        #expect(DeviceFacts.locale(appLanguage: "de", deviceLocale: "") == "de")
        #expect(DeviceFacts.locale(appLanguage: nil, deviceLocale: "") == nil)
    }

    @Test func aMacReportsNoIOSVersion() {
        #expect(DeviceFacts.osVersion(major: 17, minor: 4, patch: 1, runtime: .native) == "17.4.1")
        #expect(DeviceFacts.osVersion(major: 14, minor: 5, patch: 0, runtime: .macCatalyst) == nil)
        #expect(DeviceFacts.osVersion(major: 14, minor: 5, patch: 0, runtime: .iOSAppOnMac) == nil)
    }

    @Test func onlyIntegerBuildsAreSent() {
        #expect(DeviceFacts.build("42") == 42)
        #expect(DeviceFacts.build("0042") == 42)
        #expect(DeviceFacts.build("1.2.3") == nil)
        #expect(DeviceFacts.build("42b") == nil)
        #expect(DeviceFacts.build("") == nil)
        #expect(DeviceFacts.build(nil) == nil)
        #expect(DeviceFacts.build("-1") == nil)
        #expect(DeviceFacts.build("99999999999999999999") == nil)
    }

    /// A `CFBundleVersion` that is no integer is left out of checks and events, and said so once.
    @Test func aBuildThatIsNoIntegerIsLeftOutWithALogLine() async throws {
        let server = FakeServer()
        let log = Lines()
        var configuration = Fixture.configuration(directory: Fixture.directory(), server: server, log: log)
        configuration.bundleBuild = "1.2.3"  // as the bundle has it
        configuration.build = DeviceFacts.build(configuration.bundleBuild)
        let sdk = Upshift(configuration: configuration)
        #expect(log.lines == ["CFBundleVersion 1.2.3 is not an integer: build is left out"])
        _ = await sdk.check()
        await sdk.record(.launched)
        await sdk.flush()
        #expect(server.lastCheck("version") == "1.0" && server.lastCheck("build") == nil)
        #expect(server.events.count == 1 && server.events.first?["build"] == nil)
        await sdk.stop()

        // An integer build is sent, and nothing is logged.
        let quiet = Lines()
        configuration = Fixture.configuration(directory: Fixture.directory(), server: server, log: quiet)
        configuration.bundleBuild = "42"
        configuration.build = DeviceFacts.build(configuration.bundleBuild)
        _ = await Upshift(configuration: configuration).check(force: true)
        #expect(server.lastCheck("build") == "42")
        #expect(quiet.lines.isEmpty)
    }

    @Test func aGivenLocaleIsReducedTheSameWay() {
        let directory = Fixture.directory()
        let configuration = UpshiftConfiguration(
            appId: "expenses", platform: "ios", ingestKey: "ik", baseURL: URL(string: "https://upshift.test")!,
            storageDirectory: directory, appVersion: "1.0", locale: "en_JP@calendar=japanese")
        #expect(configuration.locale == "en-JP")
    }
}
