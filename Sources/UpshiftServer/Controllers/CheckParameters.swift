import Foundation
import Hummingbird
import UpshiftCore

/// The check's parameters, from the query of a `GET` or the JSON body of a `POST`: the same fields, the
/// same rules, the same `400`s.
enum CheckParameters {
    /// A `POST` body holds a few short fields.
    static let maximumBody = 64 * 1024

    /// The `POST` body's fields, at most ``maximumBody`` bytes of JSON.
    static func fields(of request: Request) async throws -> [String: String] {
        try request.requireContentType("application/json")
        let body = try await request.body.collect(upTo: maximumBody)
        return try fields(JSONValue.parse(Data(body.readableBytesView)))
    }

    /// The fields of a `POST` body: strings, `build` an integer; `null` is absent; members this endpoint
    /// does not read are ignored.
    static func fields(_ body: JSONValue) throws -> [String: String] {
        guard let object = body.objectValue else {
            throw ProblemDetails.badRequest("the body must be a JSON object of check fields", field: "body")
        }
        var fields: [String: String] = [:]
        for name in fieldNames {
            switch object[name] {
            case nil, .null?: continue
            case .string(let text)? where name != "build": fields[name] = text
            case .number(let number)? where name == "build":
                guard let build = number.integer(in: 0...EventValidator.maximumBuild) else {
                    throw ProblemDetails.badRequest("build must be an integer from 0 to \(EventValidator.maximumBuild)", field: name)
                }
                fields[name] = String(build)
            default:
                throw ProblemDetails.badRequest("\(name) must be \(name == "build" ? "an integer" : "a string")", field: name)
            }
        }
        return fields
    }

    static let fieldNames = ["platform", "version", "build", "os", "install", "locale", "channel", "previous"]

    /// Every parameter that is present must parse; `platform` and `version` are required.
    static func parse(_ fields: [String: String]) throws -> CheckRequest {
        func version(_ name: String) throws -> Version? {
            guard let text = fields[name] else { return nil }
            guard let version = Version(text) else { throw ProblemDetails.badRequest("\(name) is not a valid version", field: name) }
            return version
        }
        let platform = try Platform.required(fields["platform"])
        guard let installed = try version("version") else {
            throw ProblemDetails.badRequest("version is required", field: "version")
        }
        var build: Int?
        if let text = fields["build"] {
            guard let value = TextRules.integer(text, in: 0...EventValidator.maximumBuild) else {
                throw ProblemDetails.badRequest("build must be an integer from 0 to \(EventValidator.maximumBuild)", field: "build")
            }
            build = value
        }
        var install: String?
        if let text = fields["install"] {
            guard let uuid = UUIDText.parse(text) else {
                throw ProblemDetails.badRequest("install must be a UUID", field: "install")
            }
            install = uuid.uuidString.lowercased()
        }
        var locale: String?
        if let text = fields["locale"] {
            guard let tag = EventValidator.localeTag(text) else {
                throw ProblemDetails.badRequest("locale is not a locale tag", field: "locale")
            }
            locale = tag
        }
        var channel = Channel.live
        if let text = fields["channel"] {
            guard let value = Channel(rawValue: text) else {
                throw ProblemDetails.badRequest("channel must be live or beta", field: "channel")
            }
            channel = value
        }
        return CheckRequest(
            platform: platform, version: installed, build: build, os: try version("os"), install: install,
            locale: locale, channel: channel, previous: try version("previous"))
    }
}
