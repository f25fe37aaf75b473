import Foundation
import Testing
import UpshiftCore

/// An app id is the one rule of ``AppID``: every body, path and command that takes one refuses the same ids,
/// and a body refuses them with the same error.
@Suite struct AppIDTests {
    @Test(arguments: ["expenses", "notes", "ok", "a", "1", "0app", "my-app", "app-", "sim-1-ff", String(repeating: "a", count: 63)])
    func anAppIdIsAccepted(_ id: String) throws {
        #expect(try AppID(id).rawValue == id)
        #expect(AppID.isValid(id))
    }

    @Test(arguments: [
        "", "Bad App", "Not_An_Id", "EXPENSES", "Expenses", "-app", "my_app", "my app", "app!", "äpp", "app\u{0}", "app/1",
        String(repeating: "a", count: 64),
    ])
    func anIdThatBreaksTheRuleIsTheOneFieldError(_ id: String) {
        #expect(AppID(validating: id) == nil)
        #expect(!AppID.isValid(id))
        #expect(throws: FieldError("id", "must match ^[a-z0-9][a-z0-9-]{0,62}$")) { try AppID(id) }
        #expect(throws: FieldError("app", AppID.rule)) { try AppID(id, field: "app") }
    }

    @Test func aMapByAppIdIsAJSONObjectOfIdsAndABadIdFailsToDecode() throws {
        let map: [AppID: Int] = ["expenses": 1, "notes": 2]
        let data = try JSONEncoder().encode(map)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Int])
        #expect(object == ["expenses": 1, "notes": 2])
        #expect(try JSONDecoder().decode([AppID: Int].self, from: data) == map)
        let list = try JSONDecoder().decode([AppID].self, from: Data(#"["notes","expenses"]"#.utf8))
        #expect(list.sorted() == ["expenses", "notes"])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([AppID: Int].self, from: Data(#"{"Bad App":1}"#.utf8)) }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([AppID].self, from: Data(#"["ok","Not_An_Id"]"#.utf8)) }
    }
}
