import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import UpshiftCore
import UpshiftStore

/// The reports (docs/PROJECTIONS.md, "What the reports count") under `/v1/apps/{app}/reports` (read or
/// admin token): JSON, or CSV for `Accept: text/csv`. Every answer says how fresh its figures are: `dataAsOf`
/// in the JSON, and the `Data-As-Of` header on both (a CSV has no place for it that spreadsheets would not
/// misread).
///
/// Bounds: adoption covers at most 366 days (default: the 30 days ending today); the minimum-impact
/// window is 1–90 days (default 7); a release's curve covers at most 365 days after the release.
struct ReportsController {
    let reports: ReportService
    let snapshot: CatalogSnapshot
    let clock: any WallClock

    /// The routes, relative to `/v1/apps/{app}/reports`.
    func routes(authentication: BearerAuthentication) -> RouteCollection<UpshiftRequestContext> {
        let routes = RouteCollection(context: UpshiftRequestContext.self)
        routes.add(middleware: authentication).add(middleware: RequireAccess(.read))
            .add(middleware: ReaderShare(shares: reports.readers))
            .get("adoption", use: adoption)
            .get("releases/:version", use: release)
            .get("prompts", use: prompts)
            .get("minimum-impact", use: minimumImpact)
        return routes
    }

    /// `GET …/reports/adoption?platform=[&from=&to=]`
    @Sendable func adoption(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let (app, platform, query) = try scope(request, context, allowed: ["platform", "from", "to"])
        let today = UTCDay(clock.now())
        let to = try day(query, "to") ?? today
        let from = try day(query, "from") ?? max(to.adding(days: -29), Self.firstDay)
        guard from <= to else {
            throw FieldError("from", "must not be after to", kind: .inconsistent)
        }
        guard to.number - from.number < AdoptionReport.maximumDays else {
            throw FieldError("from", "the range covers at most \(AdoptionReport.maximumDays) days", kind: .inconsistent)
        }
        let report = try await reports.adoption(app: app, platform: platform, from: from, to: to)
        return try respond(request, report, csv: report.csv, name: "adoption", dataAsOf: report.dataAsOf, eventsFrom: report.eventsFrom)
    }

    /// `GET …/reports/releases/{version}?platform=`
    @Sendable func release(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let (app, platform, _) = try scope(request, context, allowed: ["platform"])
        let version = try context.pathVersion()
        guard let report = try await reports.release(app: app, platform: platform, version: version) else {
            throw ProblemDetails.notFound("no release \(version) of app \(app) on \(platform) (yet)")
        }
        return try respond(
            request, report, csv: report.csv, name: "release-\(version.normalized)", dataAsOf: report.dataAsOf,
            eventsFrom: report.eventsFrom)
    }

    /// `GET …/reports/prompts?platform=[&targetVersion=]`
    @Sendable func prompts(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let (app, platform, query) = try scope(request, context, allowed: ["platform", "targetVersion"])
        let target = try version(query, "targetVersion")
        let report = try await reports.funnels(app: app, platform: platform, target: target)
        return try respond(request, report, csv: report.csv, name: "prompts", dataAsOf: report.dataAsOf, eventsFrom: report.eventsFrom)
    }

    /// `GET …/reports/minimum-impact?platform=&version=[&window=]`
    @Sendable func minimumImpact(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let (app, platform, query) = try scope(request, context, allowed: ["platform", "version", "window"])
        guard let minimum = try version(query, "version") else {
            throw ProblemDetails.badRequest("version (the candidate minimum) is required", field: "version")
        }
        let window = try query.integer(
            "window", default: MinimumImpactReport.defaultWindowDays,
            range: 1...MinimumImpactReport.maximumWindowDays)
        let report = try await reports.minimumImpact(app: app, platform: platform, minimum: minimum, windowDays: window)
        return try respond(request, report, csv: report.csv, name: "minimum-impact", dataAsOf: report.dataAsOf, eventsFrom: report.eventsFrom)
    }

    /// The app (known), the required platform and the query; unknown parameters are refused.
    func scope(_ request: Request, _ context: UpshiftRequestContext, allowed: Set<String>) throws
        -> (app: AppID, platform: Platform, query: QueryParameters)
    {
        let app = try context.appId()
        guard snapshot.app(app) != nil else { throw CatalogError.appNotFound(app.rawValue) }
        let query = try QueryParameters(request)
        try query.refuseUnknown(allowed: allowed)
        return (app, try Platform.required(query["platform"]), query)
    }

    /// Report days: no event is older than the epoch, and PostgreSQL has no year 0.
    static let firstDay = UTCDay(number: 0)
    static let lastDay = UTCDay("9999-12-31")!

    private func day(_ query: QueryParameters, _ name: String) throws -> UTCDay? {
        guard let text = query[name] else { return nil }
        guard let day = UTCDay(text), (Self.firstDay...Self.lastDay).contains(day) else {
            throw ProblemDetails.badRequest("\(name) must be a date from 1970-01-01 to 9999-12-31, such as 2026-04-01", field: name)
        }
        return day
    }

    private func version(_ query: QueryParameters, _ name: String) throws -> Version? {
        guard let text = query[name] else { return nil }
        guard let version = Version(text) else {
            throw ProblemDetails.badRequest("\(name) '\(text)' is not a version (\(Version.syntax))", field: name)
        }
        return version
    }

    /// `Data-As-Of`: the report's `dataAsOf` (RFC 3339, UTC, milliseconds); absent while it is null.
    static let dataAsOfHeader = HTTPField.Name("Data-As-Of")!

    /// `Events-From`: the instant from which the figures count events, when retention had dropped months
    /// of the log before a projection they read was built; absent when they count the whole log.
    static let eventsFromHeader = HTTPField.Name("Events-From")!

    /// The report as JSON (keys sorted), or as its CSV (when it has one) for `Accept: text/csv`; with
    /// `Data-As-Of` and `Events-From`.
    func respond(
        _ request: Request, _ report: some Encodable, csv: String?, name: String, dataAsOf: Date?, eventsFrom: Date?
    ) throws -> Response {
        let accept = request.headers[.accept] ?? ""
        var response: Response
        if let csv, accept.contains("text/csv") {
            response = Response(
                status: .ok,
                headers: [
                    .contentType: "text/csv; charset=utf-8", .contentDisposition: "attachment; filename=\"\(name).csv\"",
                    .cacheControl: "no-store",
                ],
                body: .init(byteBuffer: ByteBuffer(string: csv)))
        } else {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            response = try JSONResponse.make(report, encoder: encoder)
        }
        if let dataAsOf { response.headers[Self.dataAsOfHeader] = Timestamp.format(dataAsOf) }
        if let eventsFrom { response.headers[Self.eventsFromHeader] = Timestamp.format(eventsFrom) }
        return response
    }
}
