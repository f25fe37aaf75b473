import ArgumentParser
import Foundation
import UpshiftCore
import UpshiftServer
import UpshiftStore

/// The CLI's way to the catalog: the same `CatalogStore` the API uses, errors as plain messages.
enum CatalogCommand {
    static var actor: String { "cli:\(ProcessInfo.processInfo.environment["USER"] ?? NSUserName())" }

    static func run<T: Sendable>(_ body: @escaping @Sendable (CatalogStore) async throws -> T) async throws -> T {
        do {
            return try await withDatabase { pool, logger in try await body(CatalogStore(pool: pool, logger: logger)) }
        } catch let error as CatalogError {
            throw CommandFailure(description: error.description)
        }
    }

    /// Catalog values as the CLI prints them: JSON with sorted keys, indented.
    static func prettyEncoder() -> JSONEncoder {
        let encoder = CatalogCoding.encoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        return encoder
    }

    static func validated<T>(_ body: () throws(FieldError) -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw CommandFailure(description: error.description)
        }
    }
}

extension AppID {
    /// `--app`, as the catalog is asked about it: text that is no app id names no app.
    static func named(_ text: String) throws(CatalogError) -> AppID {
        guard let app = AppID(validating: text) else { throw .appNotFound(text) }
        return app
    }
}

extension Platform {
    /// `--platform`, refused before anything is sent, with the rule the server answers a bad platform with.
    static func argument(_ text: String) throws -> Platform {
        guard let platform = Platform(validating: text) else { throw ValidationError(Platform.problem(with: text)) }
        return platform
    }
}
