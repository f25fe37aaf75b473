import Foundation
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// `PATCH /v1/apps/{app}`: a JSON merge patch with `If-Match`, recorded in the
/// history and followed by the check, the feeds and the store sync.
@Suite(.tags(.timed), .serverTimeLimit) struct AppEditTests {
    static let now = Timestamp.parse("2026-06-01T12:00:00Z")!

    static func text(_ reply: Server.Reply) -> String { reply.text }

    /// App `notes` created without store or bundle ids (as apps made before they existed), with an iOS
    /// and an Android page, and link-only releases on both.
    static func load(_ server: Server, key: String) async throws {
        let created = try await server.send(.POST, "/v1/apps", key: key, json: .object([
            "id": "notes", "name": "Notes",
            "updateURL": .object(["ios": "https://apps.apple.com/app/id42", "android": "market://details?id=notes"]),
        ]))
        #expect(created.status == 201, "\(text(created))")
        #expect(try created.value()["revision"] == .number(JSONNumber(1)))
        for platform in ["ios", "android"] {
            let release = try await server.send(.POST, "/v1/apps/notes/releases", key: key, json: .object([
                "platform": .string(platform), "version": "2.0", "releasedAt": "2026-05-20T12:00:00Z",
            ]))
            #expect(release.status == 201)
        }
    }

    static func patch(_ server: Server, key: String, _ body: JSONValue, ifMatch: String?) async throws -> Server.Reply {
        try await server.send(.PATCH, "/v1/apps/notes", key: key, json: body, headers: ifMatch.map { [("If-Match", $0)] } ?? [])
    }

    @Test func anAppIsEditedByMergePatchAtItsRevision() async throws {
        let harness = try await Harness.empty(now: Self.now)
        try await harness.run { server in
            try await Self.load(server, key: harness.rootKey)
            let read = try await server.send(.GET, "/v1/apps/notes", key: harness.readKey)
            #expect(read.etag == "\"1\"")
            #expect(try read.value()["revision"] == .number(JSONNumber(1)))

            let stores: JSONValue = .object([
                "storeId": .object(["ios": "1234567890"]), "bundleId": .object(["ios": "com.example.notes"]),
                "reason": "Siren's lookup",
            ])
            #expect(try await Self.patch(server, key: harness.rootKey, stores, ifMatch: nil).status == 428)
            let stale = try await Self.patch(server, key: harness.rootKey, stores, ifMatch: "\"7\"")
            #expect(stale.status == 412, "\(Self.text(stale))")
            #expect(try await Self.patch(server, key: harness.readKey, stores, ifMatch: "\"1\"").status == 403)
            let edited = try await Self.patch(server, key: harness.rootKey, stores, ifMatch: "\"1\"")
            #expect(edited.status == 200, "\(Self.text(edited))")
            #expect(edited.etag == "\"2\"")
            let app = try edited.value()
            #expect(app["storeId"] == .object(["ios": "1234567890"]) && app["bundleId"] == .object(["ios": "com.example.notes"]))
            #expect(app["updateURL"]?["android"] == .string("market://details?id=notes"))  // untouched
            // The same stale write again is refused: the revision moved on.
            #expect(try await Self.patch(server, key: harness.rootKey, stores, ifMatch: "\"1\"").status == 412)

            // The lookup now knows the app by its store and bundle ids; another bundle id finds nothing.
            let lookup = try await server.request(.GET, "/v1/apps/notes/lookup?bundleId=com.example.notes")
            #expect(try lookup.json()["resultCount"] as? Int == 1)
            #expect(try await server.request(.GET, "/v1/apps/notes/lookup?bundleId=com.other").json()["resultCount"] as? Int == 0)

            // A merge patch that removes a platform: the check answers no page, and the link-only release
            // leaves the appcast, as the warning says.
            let removed = try await Self.patch(
                server, key: harness.rootKey, .object(["updateURL": .object(["android": .null]), "reason": "no Play listing"]),
                ifMatch: "\"2\"")
            #expect(removed.status == 200, "\(Self.text(removed))")
            let warnings = try removed.value()["warnings"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(warnings.count == 1 && warnings[0].contains("android has no updateURL now: 2.0"), "\(warnings)")
            let after = try removed.value()
            #expect(after["updateURL"] == .object(["ios": "https://apps.apple.com/app/id42"]))
            let check = try await server.request(.GET, "/v1/apps/notes/check?platform=android&version=1.0").value()
            #expect(check["action"] == "soft" && (check["updateURL"] ?? .null) == .null, "\(check)")
            let appcast = Self.text(try await server.request(.GET, "/v1/apps/notes/appcast.xml?platform=android"))
            #expect(!appcast.contains("<item>"), "\(appcast)")

            // The history names each edit, its actor, reason and changes.
            let history = try await server.send(.GET, "/v1/apps/notes/history", key: harness.readKey).value()
            let entries = history["entries"]?.arrayValue ?? []
            let edits = entries.filter { $0["type"] == "app_updated" }
            #expect(edits.count == 2, "\(history)")
            #expect(edits.first?["reason"] == "no Play listing" && edits.first?["actor"]?.stringValue?.contains("root") == true,
                "\(edits)")
            #expect(edits.first?["changes"]?["updateURL"] != nil)
            #expect(edits.last?["changes"]?["bundleId"]?["to"] == .object(["ios": "com.example.notes"]))
        }
    }

    @Test func badPatchesAreRefusedNamingTheField() async throws {
        let harness = try await Harness.empty(now: Self.now)
        try await harness.run { server in
            try await Self.load(server, key: harness.rootKey)
            let cases: [(JSONValue, String)] = [
                (.object(["id": "other"]), "id"), (.object(["id": "notes"]), "id"),
                (.object(["nmae": "x", "updateUrl": .object([:])]), "nmae"),
                (.object(["name": .null]), "name"), (.object(["defaultLocale": .null]), "defaultLocale"),
                (.object(["name": ""]), "name"), (.object(["name": .number(JSONNumber(1))]), "name"),
                (.object(["updateURL": .object(["ios": "ftp://x"])]), "updateURL.ios"),
                (.object(["updateURL": .object(["IOS!": "https://x.example"])]), "updateURL.IOS!"),
                (.object(["storeId": .object(["ios": .number(JSONNumber(42))])]), "storeId.ios"),
                (.object(["bundleId": .array([])]), "bundleId"),
                (.object(["bundleId": .object(["ios": .string(String(repeating: "a", count: 201))])]), "bundleId.ios"),
                (.array([]), "body"),
            ]
            for (body, field) in cases {
                let reply = try await Self.patch(server, key: harness.rootKey, body, ifMatch: "\"1\"")
                #expect(reply.status == 400, "\(body): \(reply.status)")
                #expect(try reply.value()["field"] == .string(field), "\(body): \(Self.text(reply))")
            }
            let unknown = try await Self.patch(server, key: harness.rootKey, .object(["a": 1, "b": 2]), ifMatch: "\"1\"")
            #expect(Self.text(unknown).contains("unknown fields: a, b"))
            // Nothing was written: still revision 1.
            #expect(try await server.send(.GET, "/v1/apps/notes", key: harness.readKey).etag == "\"1\"")
            // A patch that changes nothing keeps the revision and records nothing.
            let same = try await Self.patch(server, key: harness.rootKey, .object(["name": "Notes"]), ifMatch: "\"1\"")
            #expect(same.status == 200 && same.etag == "\"1\"")
        }
    }

    /// The store sync asks for an app as soon as an edit gives it a bundle id, not after its pause.
    @Test func theStoreSyncFollowsAnEditWithinAPoll() async throws {
        let harness = try await Harness.empty(now: Self.now)
        try await FakeAppStore.run { store in
            store.answer("com.example.notes", with: .json(FakeAppStore.listing(
                bundleId: "com.example.notes", version: "2.1", released: "2026-05-30T12:00:00Z")))
            var configuration = harness.configuration()
            var sync = AppStoreSyncSettings(interval: .seconds(3_600))
            sync.importer.lookupURL = store.lookupURL
            configuration.storeSync = sync  // rounds a minute apart but for catalog changes
            try await harness.run(configuration) { server in
                try await Self.load(server, key: harness.rootKey)
                try await Task.sleep(for: .seconds(1))  // the first round is over: nothing had a bundle id
                #expect(store.requests(for: "com.example.notes").isEmpty)
                let started = ContinuousClock.now
                let edited = try await Self.patch(
                    server, key: harness.rootKey, .object(["bundleId": .object(["ios": "com.example.notes"])]), ifMatch: "\"1\"")
                #expect(edited.status == 200)
                try await Waits.until("the store asked for the new bundle id", timeout: .seconds(15)) {
                    !store.requests(for: "com.example.notes").isEmpty
                }
                print("store sync asked \(ContinuousClock.now - started) after the edit")
                try await Waits.until("the check offers the store's 2.1", timeout: .seconds(5)) {
                    try await server.request(.GET, "/v1/apps/notes/check?platform=ios&version=2.0").value()["latestVersion"] == "2.1"
                }
            }
        }
    }
}
