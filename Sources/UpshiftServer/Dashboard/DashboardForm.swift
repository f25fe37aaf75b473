import Foundation
import Hummingbird
import NIOCore
import UpshiftCore
import UpshiftStore

/// `application/x-www-form-urlencoded` bodies, as browsers send forms, decoded by Hummingbird's
/// `URLEncodedFormDecoder` into a form type of each page. Every name and value must be percent-encoded
/// UTF-8 text without control characters (line breaks only in values, which a textarea sends), each
/// name at most once, each value at most 10,000 characters; anything else is a `400` naming the field.
enum DashboardForm {
    static let maximumBytes = 64 * 1024
    static let maximumValue = 10_000

    /// The body of a form post: `415` for another content type, `413` past 64 KiB.
    static func collect(_ request: Request) async throws -> ByteBuffer {
        try request.requireContentType("application/x-www-form-urlencoded")
        do {
            return try await request.body.collect(upTo: maximumBytes)
        } catch is NIOTooManyBytesError {
            throw ProblemDetails.tooLarge("a form of at most \(maximumBytes / 1024) KiB")
        }
    }

    /// The form `T` of a request (read once by ``SessionMiddleware`` for its CSRF token, then here).
    static func decode<T: Decodable>(_ type: T.Type, from request: Request) async throws -> T {
        try decode(type, from: await collect(request))
    }

    static func decode<T: Decodable>(_ type: T.Type, from body: ByteBuffer) throws -> T {
        // Hummingbird's decoder is lenient where a form may not be (bytes that are not UTF-8 become
        // U+FFFD): every pair is first held to the rules of every request's text, as queries are.
        let bytes = Array(body.readableBytesView)
        let fields = try RequestText.pairs(bytes, of: "form", plusIsSpace: true, lineBreaksInValues: true)
        if let name = fields.keys.sorted().first(where: { TextRules.length(fields[$0] ?? "") > maximumValue }) {
            throw ProblemDetails.badRequest("\(name): at most \(maximumValue) characters", field: name)
        }
        do {
            return try URLEncodedFormDecoder().decode(T.self, from: String(decoding: bytes, as: UTF8.self))
        } catch let error as URLEncodedFormError {
            throw ProblemDetails.badRequest("the form is not well-formed: \(error.description)", field: "form")
        } catch let error as DecodingError {
            let field = Self.field(of: error)
            throw ProblemDetails.badRequest("\(field) must be one text value", field: field)
        }
    }

    private static func field(of error: DecodingError) -> String {
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            context.codingPath.first?.stringValue ?? "form"
        case .keyNotFound(let key, _): key.stringValue
        @unknown default: "form"
        }
    }

    /// A value for a query string.
    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? ""
    }

    static func escape(_ platform: Platform) -> String { escape(platform.rawValue) }
}

/// The fields every catalog form carries besides its own: the platform, the revision the form was
/// rendered with (`If-Match` of the API) and the reason that goes into the history.
protocol CatalogWriteForm: Decodable {
    var platform: String? { get }
    var revision: String? { get }
    var reason: String? { get }
}

extension CatalogWriteForm {
    /// The platform, the revision and the required reason, checked as the API checks them.
    func writeContext() throws -> (platform: Platform, revision: Int, reason: String) {
        let platform = try Platform.required(platform)
        guard let revision = revision.flatMap({ JSONNumber(literal: $0)?.integer(in: 0...Int(Int64.max)) }) else {
            throw ProblemDetails.badRequest("revision: missing; reload the page", field: "revision")
        }
        let reason = (reason ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard !reason.isEmpty else { throw ProblemDetails.badRequest("reason: say why (it goes into the history)", field: "reason") }
        try CatalogInput.checkText(reason, field: "reason", maximumLength: CatalogInput.maximumReasonLength, lineBreaks: true)
        return (platform, revision, reason)
    }
}

extension Identity {
    /// The hidden fields of every catalog form: what ``CatalogWriteForm`` and ``SessionMiddleware`` read back.
    func writeFields(platform: Platform, revision: Int) -> HTML {
        """
        <input type="hidden" name="csrf" value="\(session?.csrfToken ?? "")"><input type="hidden" name="platform" value="\(platform)">\
        <input type="hidden" name="revision" value="\(revision)">
        """
    }
}
