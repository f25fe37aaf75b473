/// `scripts/bench catalog`: a catalog of many apps, one of them written every 100 ms
/// through one instance, while checks over other apps run on two. A write must cost the app it changed:
/// the other apps' cached answers stay warm, and the written app's checks see each write on both
/// instances within a second.
public struct CatalogSummary: Sendable {
    public var facts: RunFacts
    public var outputFolder: String
    public var apps: Int
    public var releasesPerApp: Int
    public var seconds: Double
    /// Distinct check questions asked of the other apps, and over how many apps.
    public var questions: Int
    public var questionApps: Int
    /// Writes made, and for each the seconds until the other instance's check answered with it (nil: not
    /// within the bound).
    public var propagation: [Double?]
    /// `upshift_check_cache_lookups_total` over the load, both instances together, and how many of those
    /// lookups were the benchmark's own checks of the written app on B (each write turns one of them into
    /// a miss: the app it changed goes cold, as it must).
    public var hits: Double
    public var misses: Double
    public var probes: Int
    /// 2xx checks per second the load got, both instances together, and the answers by status.
    public var checksPerSecond: Double
    public var checkStatuses: String
    public var servers: [ServerUsage]

    /// A write must reach the other instance's check within this.
    public static let propagationBound = 1.0
    /// The other apps' answers must be found in the cache at least this often.
    public static let hitRateTarget = 0.99

    public init(
        facts: RunFacts, outputFolder: String, apps: Int, releasesPerApp: Int, seconds: Double, questions: Int,
        questionApps: Int, propagation: [Double?], hits: Double, misses: Double, probes: Int, checksPerSecond: Double,
        checkStatuses: String, servers: [ServerUsage]
    ) {
        self.facts = facts
        self.outputFolder = outputFolder
        self.apps = apps
        self.releasesPerApp = releasesPerApp
        self.seconds = seconds
        self.questions = questions
        self.questionApps = questionApps
        self.propagation = propagation
        self.hits = hits
        self.misses = misses
        self.probes = probes
        self.checksPerSecond = checksPerSecond
        self.checkStatuses = checkStatuses
        self.servers = servers
    }

    /// The other apps' lookups: the written app's probes left out (one miss per write, the rest hits).
    public var otherHits: Double { hits - Double(probes - propagation.count) }
    public var otherMisses: Double { misses - Double(propagation.count) }

    /// The hit rate of the other apps' checks.
    public var hitRate: Double? { otherHits + otherMisses > 0 ? otherHits / (otherHits + otherMisses) : nil }

    public func render() -> Summary {
        var out = SummaryWriter()
        out.head(
            "Upshift catalog benchmark: \(Format.fixed(seconds, 0)) s of writes, \(facts.started)", facts: facts,
            limiter: "off on the check (UPSHIFT_CHECK_RATE_LIMIT=0: one loopback client)")
        out.line("catalog: \(Format.grouped(apps)) apps, \(releasesPerApp) releases each; two instances (http), one database")
        out.line("writes: one app's policy, through instance A, every 100 ms (or as soon as the last was seen on B)")
        out.line("checks: \(questions) distinct questions over \(questionApps) other apps, on both instances, 4 connections each waiting 20 ms after each answer (about 200/s)")
        out.line()
        let seen = propagation.compactMap { $0 }.sorted()
        let missed = propagation.count - seen.count
        func percentile(_ p: Double) -> String {
            guard !seen.isEmpty else { return "n/a" }
            let index = min(seen.count - 1, Int((p * Double(seen.count)).rounded(.up)) - 1)
            return Format.fixed(seen[max(0, index)] * 1_000, 1) + " ms"
        }
        let allSeen = missed == 0 && !propagation.isEmpty
        out.line(
            "writes seen by B's check: \(seen.count) of \(propagation.count); p50 \(percentile(0.5)), p99 \(percentile(0.99)), max \(seen.last.map { Format.fixed($0 * 1_000, 1) + " ms" } ?? "n/a") (bound \(Format.fixed(Self.propagationBound, 0)) s)  "
                + Verdict.passOrMiss(allSeen))
        if !allSeen { out.fail() }
        let rate = hitRate
        let rateMet = rate.map { $0 >= Self.hitRateTarget } ?? false
        out.line(
            "the other apps' checks in the answer cache: \(Format.grouped(Int(otherHits))) hits, \(Format.grouped(Int(otherMisses))) misses (the written app's \(Format.grouped(probes)) probes left out), hit rate \(rate.map { Format.fixed($0 * 100, 2) + " %" } ?? "n/a") (target >= \(Format.fixed(Self.hitRateTarget * 100, 0)) %)  "
                + Verdict.passOrMiss(rateMet))
        if !rateMet { out.fail() }
        out.line("checks: \(Format.fixed(checksPerSecond, 0)) answers/s 2xx; statuses \(checkStatuses)")
        let forbidden = checkStatuses.split(separator: ",").filter { !$0.hasPrefix("2") && $0 != "none" }
        if !forbidden.isEmpty {
            out.line("CHECKS NOT 2xx: \(forbidden.joined(separator: ","))")
            out.fail()
        }
        out.line("upshift serve: " + servers.enumerated().map { "\($0.offset == 0 ? "A" : "B") \($0.element), exit \($0.element.exitStatus)" }.joined(separator: "; "))
        if servers.contains(where: { $0.exitStatus != 0 }) { out.fail() }
        out.durability(facts.durability)
        return out.finish(
            outputFolder: outputFolder,
            musts: "every write seen by the other instance within 1 s, the other apps' answers cached >= 99 %, checks 2xx, exit 0, durability on")
    }
}
