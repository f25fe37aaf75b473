import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import UpshiftCore
import UpshiftStore

/// One import of an app's current App Store version: ask Apple's lookup API for the app's bundle id, read
/// the answer (``AppStoreImport``) and add the release it names through the catalog, as a catalog event with
/// reason `store import` and actor `store-sync`. `upshift releases import` runs it once; ``AppStoreSync`` runs
/// it for every app on an interval.
public struct AppStoreImporter: Sendable {
    /// Where the lookup is asked, and how much of it is read.
    public struct Settings: Sendable {
        /// Apple's lookup; a country's (`https://itunes.apple.com/de/lookup`) or a stand-in's may replace it.
        public static let appleLookupURL = "https://itunes.apple.com/lookup"

        public var lookupURL = Settings.appleLookupURL
        /// The whole answer, head and body, must arrive within this time.
        public var timeout: Duration = .seconds(10)
        /// A longer answer is refused unread.
        public var maximumBytes = 1 << 20

        public init() {}

        /// `UPSHIFT_STORE_LOOKUP_URL`, checked: an absolute http(s) URL.
        public static func lookupURL(_ text: String, name: String) throws -> String {
            guard CatalogInput.isDownloadURL(text) else {
                throw ConfigurationError.invalid(name, text, expected: "an absolute http(s) URL, such as \(appleLookupURL)")
            }
            return text
        }
    }

    /// How an import ended.
    public enum Result: Sendable, Equatable {
        /// The store's version was added at this revision.
        case added(Release, revision: Int)
        /// The store's version is in the catalog already.
        case present(Version)
        /// The store lists no app with the bundle id.
        case notListed
        /// The answer came but adds nothing (malformed, another bundle id, an invalid version …).
        case refused(String)
        /// No usable answer: the request failed, timed out, was answered other than `200`, or too long.
        case failed(String)

        /// The label of ``AppStoreSync``'s metric.
        public var outcome: String {
            switch self {
            case .added: "added"
            case .present: "present"
            case .notListed: "not_listed"
            case .refused: "refused"
            case .failed: "failed"
            }
        }
    }

    public var settings: Settings
    let catalog: CatalogStore
    let clock: any WallClock
    let logger: Logger

    public init(settings: Settings, catalog: CatalogStore, clock: any WallClock, logger: Logger) {
        self.settings = settings
        self.catalog = catalog
        self.clock = clock
        self.logger = logger
    }

    /// Imports the current store version of `appId` on `platform`. Throws only what the catalog throws
    /// (no such app, a database error); everything the store does is a ``Result``.
    public func run(appId: AppID, platform: Platform) async throws -> Result {
        guard let app = try await catalog.app(id: appId) else { throw CatalogError.appNotFound(appId.rawValue) }
        if let reason = AppStoreImport.unsupported(app.app, platform: platform) { return .refused(reason) }
        let url = AppStoreImport.url(base: settings.lookupURL, bundleId: app.app.bundleId[platform]!, platform: platform)
        let answer: [UInt8]
        switch await fetch(url) {
        case .success(let bytes): answer = bytes
        case .failure(let failure): return .failed("\(url): \(failure.description)")
        }
        // Read the catalog again: the release may have been added while the store answered.
        guard let current = try await catalog.app(id: appId) else { throw CatalogError.appNotFound(appId.rawValue) }
        switch AppStoreImport.outcome(of: answer, catalog: current, platform: platform) {
        case .present(let version): return .present(version)
        case .notListed: return .notListed
        case .refused(let reason): return .refused(reason)
        case .add(let release):
            do {
                let write = try await catalog.addRelease(
                    appId: appId, release, actor: AppStoreImport.actor, reason: AppStoreImport.reason, now: clock.now())
                return .added(write.value, revision: write.revision)
            } catch CatalogError.releaseExists {
                return .present(release.version)  // another import, or an admin, was first
            }
        }
    }

    /// Why an answer could not be read.
    struct FetchFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// The body of a `200` answer to `GET url`, bounded in bytes and in time (head and body together).
    func fetch(_ url: String) async -> Swift.Result<[UInt8], FetchFailure> {
        let (timeout, maximumBytes) = (settings.timeout, settings.maximumBytes)
        let request = {
            var request = HTTPClientRequest(url: url)
            request.headers.add(name: "Accept", value: "application/json")
            request.headers.add(name: "User-Agent", value: "upshift-store-sync")
            return request
        }()
        do {
            return .success(
                try await withDeadline(timeout) {
                    let response = try await HTTPClient.shared.execute(request, timeout: .init(timeout))
                    guard response.status == .ok else {
                        throw FetchFailure(description: "answered \(response.status.code), not 200")
                    }
                    if let length = response.headers.first(name: "Content-Length").flatMap(Int.init), length > maximumBytes {
                        throw FetchFailure(description: "the answer is \(length) bytes, more than \(maximumBytes) bytes")
                    }
                    do {
                        return Array(try await response.body.collect(upTo: maximumBytes).readableBytesView)
                    } catch is NIOTooManyBytesError {
                        throw FetchFailure(description: "the answer is more than \(maximumBytes) bytes")
                    }
                })
        } catch let failure as FetchFailure {
            return .failure(failure)
        } catch is DeadlineExceeded {
            return .failure(FetchFailure(description: "no whole answer within \(timeout)"))
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            return .failure(FetchFailure(description: "no whole answer within \(timeout)"))
        } catch {
            return .failure(FetchFailure(description: "\(error)"))
        }
    }
}
