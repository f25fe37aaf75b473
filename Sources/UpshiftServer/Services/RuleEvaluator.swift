import Foundation
import Logging
import Metrics
import Synchronization
import UpshiftCore
import UpshiftStore

/// The rules' evaluation (docs/OPERATIONS.md, "Rules"), run by the rollout worker every
/// `UPSHIFT_RULES_INTERVAL`: each rule that is not `off` reads the read models (never the log), decides
/// with the Core functions (``HealthRule``, ``RaiseMinimumRule``), and, when `live`, acts as a catalog write
/// with actor `rule:<id>`, after a backtest of the change; a dry run records what it would do. Each outcome
/// is recorded once per change (``RuleRecord/repeats(_:)``).
struct RuleEvaluator: Sendable {
    let catalog: CatalogStore
    let reports: ReportStore
    let projections: ProjectionStore
    let records: RuleRecordStore
    /// The backtest of `proposed` against `current` for the app and platform, under the server's
    /// backtest limit and counted against no token.
    let backtest: @Sendable (AppID, Platform, AppCatalog, AppCatalog, Date) async throws -> BacktestReport
    let clock: any WallClock
    let metrics: any MetricsFactory
    let logger: Logger
    /// Where a health rule's condition that held is told as `health.regressed` (nil: nowhere).
    var webhooks: WebhookStore?
    /// What the advance rules decided at their last evaluation, which the rollout worker's tick follows.
    let holds = ScheduleHolds()

    /// A projection whose oldest unapplied event is older than this, or that is being rebuilt, is not read.
    static let maximumLagSeconds = 300.0

    /// The projections each kind reads (an advance rule: those of the halting rules it follows, checked
    /// by ``advance(_:in:freshness:)``).
    static func projections(of kind: RuleDefinition.Kind) -> [String] {
        switch kind {
        case .haltOnHealth: ["release_health", "adoption"]
        case .raiseMinimum: ["install_state"]
        case .haltOnPrompts: ["prompt_funnel"]
        case .advance: []
        }
    }

    /// Evaluates every rule of `apps` that is not off, and the health rules that are off of the apps
    /// subscribed to `health.regressed` (for that alone); returns the apps it wrote.
    func evaluate(_ apps: [AppID: AppCatalog]) async throws -> Set<AppID> {
        defer { Counter(label: "upshift_rule_evaluations_total", factory: metrics).increment() }
        let alerted = Set(try await webhooks?.subscriptions(to: .healthRegressed).map(\.appId) ?? [])
        func evaluated(_ rule: Rule, of appId: AppID) -> Bool {
            guard rule.definition.state == .off else { return true }
            if case .haltOnHealth = rule.definition.kind { return alerted.contains(appId) }
            return false
        }
        let ruled = apps.filter { appId, app in app.rules.values.contains { $0.contains { evaluated($0, of: appId) } } }
        guard !ruled.isEmpty else {
            holds.replace(with: [:])
            return []
        }
        let now = clock.now()
        let freshness = try await projections.freshness(now: now)
        var written: Set<AppID> = []
        var next: [AppID: [Platform: [String: String]]] = [:]
        for (appId, app) in ruled.sorted(by: { $0.key < $1.key }) {
            var context = AppContext(appId: appId, app: app, now: now)
            // Halts first: a release a halt stops is not raised to on the same evaluation.
            let rules = app.rules.keys.sorted().flatMap(app.rules(for:)).filter { evaluated($0, of: appId) }
                .sorted { Self.order($0.definition.kind) < Self.order($1.definition.kind) }
            for rule in rules where try await evaluate(rule, in: &context, freshness: freshness) {
                written.insert(appId)
            }
            next[appId] = context.holds
        }
        // Only a whole evaluation changes the holds: one that failed half-way leaves them as they were.
        holds.replace(with: next)
        return written
    }

    /// What `rule` would record now for each release it watches, every figure included, acting on nothing and
    /// recording nothing: the dashboard's preview.
    func preview(_ rule: Rule, app: AppCatalog) async throws -> [RuleRecord] {
        let now = clock.now()
        var context = AppContext(appId: app.app.id, app: app, now: now, preview: [])
        _ = try await evaluate(rule, in: &context, freshness: try await projections.freshness(now: now))
        return context.preview ?? []
    }

    /// Why a rule reading `names` is skipped now, or nil.
    static func stale(_ names: [String], freshness: [String: (rebuilding: Bool, lagSeconds: Double)]) -> String? {
        for name in names {
            guard let state = freshness[name] else { return "projection \(name) has no active generation yet" }
            if state.rebuilding { return "projection \(name) is being rebuilt" }
            if state.lagSeconds > maximumLagSeconds {
                return "projection \(name) lags by more than \(Int(maximumLagSeconds)) s"
            }
        }
        return nil
    }

    private static func order(_ kind: RuleDefinition.Kind) -> Int {
        switch kind {
        case .haltOnHealth, .haltOnPrompts: 0
        case .advance: 1
        case .raiseMinimum: 2
        }
    }

    /// What one evaluation knows of an app: its catalog as the worker read it (updated by the writes made
    /// meanwhile), and its catalog events, read once when a rule first needs them.
    struct AppContext {
        let appId: AppID
        var app: AppCatalog
        let now: Date
        var timeline: [(at: Date, event: CatalogEvent)]?
        /// A preview's records, instead of records written and actions taken (nil: for real).
        var preview: [RuleRecord]?
        /// The advance rules' holds decided so far: platform → release (`Version.normalized`) → why.
        var holds: [Platform: [String: String]] = [:]
        /// The halting rules' decisions of this evaluation, by rule and release, which the advance rules
        /// (evaluated after them) read again instead of asking the read models twice.
        var decisions: [String: HaltDecision] = [:]

        static func key(_ rule: Rule, _ release: Release) -> String { "\(rule.platform) \(rule.id) \(release.version.normalized)" }
    }

    /// One rule, skipped while a projection it reads is stale: true when it wrote the catalog.
    private func evaluate(
        _ rule: Rule, in context: inout AppContext, freshness: [String: (rebuilding: Bool, lagSeconds: Double)]
    ) async throws -> Bool {
        if rule.definition.state == .off, context.preview == nil {
            // An off health rule is read only to tell `health.regressed`: it records and does nothing (a
            // preview of one shows what it would record, below).
            guard Self.stale(Self.projections(of: rule.definition.kind), freshness: freshness) == nil else { return false }
            let decide = decider(rule, releases: context.app.releases(for: rule.platform), appId: context.appId, now: context.now)
            for release in Self.watched(context.app.releases(for: rule.platform), now: context.now) {
                let decision = try await decide(release)
                if decision.halt { try await tellRegressed(rule, release, summary: decision.summary, in: context) }
            }
            return false
        }
        if let stale = Self.stale(Self.projections(of: rule.definition.kind), freshness: freshness) {
            try await record(
                RuleRecord(
                    ruleId: rule.id, platform: rule.platform, at: context.now, outcome: .skipped, version: nil, action: nil,
                    summary: stale), in: &context, skip: true)
            return false
        }
        switch rule.definition.kind {
        case .haltOnHealth, .haltOnPrompts:
            let decide = decider(rule, releases: context.app.releases(for: rule.platform), appId: context.appId, now: context.now)
            return try await halt(rule, in: &context, decide: decide)
        case .raiseMinimum(let raise):
            return try await raiseMinimum(rule, raise, in: &context)
        case .advance:
            try await advance(rule, in: &context, freshness: freshness)
            return false
        }
    }

    typealias HaltDecision = (halt: Bool, summary: String, never: Bool)

    /// How a halting rule decides about one release of `releases`: whether to halt it, the figures, and
    /// whether the rule can never act on it (recorded once). A rule of another kind halts nothing.
    private func decider(_ rule: Rule, releases: [Release], appId: AppID, now: Date) -> (Release) async throws -> HaltDecision {
        switch rule.definition.kind {
        case .haltOnHealth(let mode):
            return { release in
                let previous = ReleaseHealth.previous(of: release, among: releases)
                let versions = [release.version.normalized] + (previous.map { [$0.version.normalized] } ?? [])
                let read = try await reports.healthCohorts(app: appId, platform: rule.platform, versions: versions)
                func cohorts(_ release: Release) -> ReleaseCohorts {
                    let found = read.value[release.version.normalized]
                    return ReleaseCohorts(
                        version: release.version.normalized, releasedAt: release.releasedAt, cells: found?.cells ?? [],
                        exitsOnRecord: found?.exits ?? false)
                }
                let evaluation = HealthRule.evaluate(mode, release: cohorts(release), previous: previous.map(cohorts), now: now)
                return (evaluation.outcome == .regressed, evaluation.summary, evaluation.outcome == .noBaseline)
            }
        case .haltOnPrompts(let skip, let blocked, let unfinished, let minimumInstalls):
            return { release in
                let read = try await reports.funnels(app: appId, platform: rule.platform, target: release.version)
                let starts = try await reports.unfinishedStarts(app: appId, platform: rule.platform, target: release.version, now: now)
                let evaluation = PromptRule.evaluate(
                    read.value, starts: starts.value, skip: skip, blocked: blocked, unfinished: unfinished,
                    minimumInstalls: minimumInstalls)
                return (evaluation.regressed, evaluation.summary, false)
            }
        case .advance, .raiseMinimum:
            return { _ in (false, "", true) }
        }
    }

    static func halts(_ kind: RuleDefinition.Kind) -> Bool {
        switch kind {
        case .haltOnHealth, .haltOnPrompts: true
        case .advance, .raiseMinimum: false
        }
    }

    // MARK: Advance

    /// An advance rule: each release of its platform whose schedule runs (or is held) is held while a halting
    /// rule of the platform (not `off`) finds it outside its thresholds; the rollout worker's tick holds and
    /// releases the schedule (``ScheduleHolds``). Skipped, its holds stay as they were.
    private func advance(
        _ rule: Rule, in context: inout AppContext, freshness: [String: (rebuilding: Bool, lagSeconds: Double)]
    ) async throws {
        let halting = context.app.rules(for: rule.platform).filter { $0.definition.state != .off && Self.halts($0.definition.kind) }
        for other in halting {
            if let stale = Self.stale(Self.projections(of: other.definition.kind), freshness: freshness) {
                try await record(
                    RuleRecord(
                        ruleId: rule.id, platform: rule.platform, at: context.now, outcome: .skipped, version: nil, action: nil,
                        summary: "\(other.id): \(stale)"), in: &context, skip: true)
                // Its holds stay: those of the last evaluation, or after a restart those the catalog shows.
                let kept = holds.current(context.appId, rule.platform)
                    ?? Dictionary(
                        context.app.releases(for: rule.platform).compactMap { release in
                            release.rolloutSchedule.flatMap { $0.state == .held ? (release.version.normalized, $0.holdReason ?? "held") : nil }
                        }, uniquingKeysWith: { first, _ in first })
                context.holds[rule.platform, default: [:]].merge(kept) { current, _ in current }
                return
            }
        }
        let releases = context.app.releases(for: rule.platform)
        var held: [String: String] = context.holds[rule.platform] ?? [:]
        for release in releases where release.status == .live {
            // A paused one too: its pause may end (after 30 days) before the next evaluation, into a hold.
            guard let schedule = release.rolloutSchedule, [.running, .held, .paused].contains(schedule.state) else { continue }
            var reasons: [String] = []
            for other in halting {
                let decision: HaltDecision
                if let known = context.decisions[AppContext.key(other, release)] {
                    decision = known
                } else {
                    decision = try await decider(other, releases: releases, appId: context.appId, now: context.now)(release)
                }
                if decision.halt { reasons.append("\(other.id): \(decision.summary)") }
            }
            let live = rule.definition.state == .live
            let outcome: RuleRecord.Outcome = reasons.isEmpty ? .idle : (live && context.preview == nil ? .acted : .wouldAct)
            let summary = reasons.isEmpty
                ? "\(rule.id): within the thresholds of \(halting.isEmpty ? "no halting rule" : halting.map(\.id).joined(separator: ", "))"
                : "\(rule.id) holds the schedule: " + reasons.joined(separator: "; ")
            // A hold is the schedule's write on the advance rules' behalf; a person who resumed (or otherwise
            // changed) the schedule after it is not held again until the rule is written again.
            if !reasons.isEmpty,
                let person = RuleOverride.overriding(
                    rule, field: "rolloutSchedule",
                    writes: Self.writes(to: release.version, of: rule.platform, in: try await timeline(&context)) { event in
                        event.actor == CatalogEvent.scheduleActor && event.schedule?.held != nil ? rule.actor : event.actor
                    })
            {
                let text = "\(summary); \(person.actor) changed rolloutSchedule at \(Timestamp.format(person.at)) after a hold"
                try await record(
                    RuleRecord(
                        ruleId: rule.id, platform: rule.platform, at: context.now, outcome: .standsAside,
                        version: release.version.normalized, action: "hold", summary: text), in: &context)
                continue
            }
            if live, !reasons.isEmpty { held[release.version.normalized] = summary }
            try await record(
                RuleRecord(
                    ruleId: rule.id, platform: rule.platform, at: context.now, outcome: outcome, version: release.version.normalized,
                    action: reasons.isEmpty ? nil : "hold", summary: summary), in: &context)
        }
        context.holds[rule.platform] = held
    }

    // MARK: Halt on health

    /// The releases a health rule watches: live, out, not halted, within their first 30 days of cohorts
    /// (and the days those take to settle).
    static func watched(_ releases: [Release], now: Date) -> [Release] {
        let days = Double(HealthRule.monitoredDays + HealthRule.settledDays)
        return releases.filter { release in
            release.status == .live && !release.rolloutPaused && release.rolloutPercent > 0 && release.releasedAt <= now
                && now.timeIntervalSince(release.releasedAt) < days * 86_400
        }
    }

    /// A halting rule over the watched releases of its platform: `decide` tells, for one, whether it
    /// should be halted, the figures, and whether the rule can never act on it (recorded once).
    private func halt(
        _ rule: Rule, in context: inout AppContext,
        decide: (Release) async throws -> (halt: Bool, summary: String, never: Bool)
    ) async throws -> Bool {
        let (appId, now) = (context.appId, context.now)
        var wrote = false
        for release in Self.watched(context.app.releases(for: rule.platform), now: context.now) {
            let decision = try await decide(release)
            context.decisions[AppContext.key(rule, release)] = decision
            if decision.halt, case .haltOnHealth = rule.definition.kind {
                try await tellRegressed(rule, release, summary: decision.summary, in: context)
            }
            if try await act(
                rule, version: release.version, field: "rolloutPaused", wanted: decision.halt, action: "halt",
                summary: "\(rule.id): \(decision.summary)", announced: decision.never, in: &context,
                proposed: { app in
                    var halted = release
                    try? halted.perform(.halt, now: now)
                    app.upsert(halted)
                },
                backtestRequired: false,
                write: { reason, now, record in
                    try await catalog.updateRelease(
                        appId: appId, platform: rule.platform, version: release.version,
                        expectedRevision: release.revision, actor: rule.actor, reason: reason, now: now, ruleRecord: record
                    ) { current in
                        // Halted as a person halts it: a schedule stops too (halt wins over advance).
                        var halted = current
                        try halted.perform(.halt, now: now)
                        return halted
                    }.revision
                })
            {
                wrote = true
            }
        }
        return wrote
    }

    // MARK: Raise the minimum

    private func raiseMinimum(_ rule: Rule, _ raise: RaiseMinimumRule, in context: inout AppContext) async throws -> Bool {
        let platform = rule.platform, appId = context.appId
        let policy = context.app.policy(for: platform)
        let releases = context.app.releases(for: platform)
        let since = context.now.addingTimeInterval(-Double(raise.windowDays) * 86_400)
        let active = try await reports.activeInstalls(app: appId, platform: platform, since: since)
        let impact = MinimumImpactReport(
            app: appId, platform: platform, minimum: raise.version, windowDays: raise.windowDays, releases: releases,
            now: context.now, groups: active.value, dataAsOf: active.dataAsOf)
        let timeline = try await timeline(&context)
        let states = timeline.compactMap { entry -> (at: Date, release: Release)? in
            guard let release = entry.event.release, release.platform == platform, release.version == raise.version else { return nil }
            return (entry.at, release)
        }
        let evaluation = raise.evaluate(currentMinimum: policy.minimumVersion, impact: impact, history: states, now: context.now)
        let summary = "\(rule.id): " + (evaluation.outcome == .done ? "the minimum is already at or above \(raise.version.normalized)" : evaluation.summary)
        return try await act(
            rule, version: raise.version, field: "minimumVersion", wanted: evaluation.outcome == .raise, action: "raise_minimum",
            summary: summary, in: &context,
            proposed: { app in app.policies[platform] = Self.raised(policy, to: raise.version) },
            backtestRequired: true,
            write: { reason, now, record in
                try await catalog.replacePolicy(
                    appId: appId, platform: platform, Self.raised(policy, to: raise.version),
                    expectedRevision: policy.revision, actor: rule.actor, reason: reason, now: now, ruleRecord: record
                ).revision
            })
    }

    static func raised(_ policy: Policy, to version: Version) -> Policy {
        var raised = policy
        raised.minimumVersion = version
        if let target = raised.targetVersion, target < version { raised.targetVersion = version }
        return raised
    }

    // MARK: Acting and recording

    /// Records what `rule` does about `version` now, and acts when it is live: `wanted` says whether its
    /// condition holds. A rule a person overrode on `field` stands aside. The action is backtested first
    /// (`proposed` edits a copy of the catalog); when the backtest fails, the action proceeds only unless
    /// `backtestRequired`. `write` makes the catalog write with the reason given and returns its revision.
    private func act(
        _ rule: Rule, version: Version, field: String, wanted: Bool, action: String, summary: String,
        announced: Bool = false, in context: inout AppContext, proposed: (inout AppCatalog) -> Void, backtestRequired: Bool,
        write: @Sendable (String, Date, RuleRecord) async throws -> Int
    ) async throws -> Bool {
        let appId = context.appId, now = context.now, name = version.normalized
        func entry(_ outcome: RuleRecord.Outcome, _ action: String?, _ text: String) -> RuleRecord {
            RuleRecord(ruleId: rule.id, platform: rule.platform, at: now, outcome: outcome, version: name, action: action, summary: text)
        }
        guard wanted else {
            try await record(entry(.idle, nil, summary), in: &context, announced: announced)
            return false
        }
        let timeline = try await timeline(&context)
        let writes =
            field == "minimumVersion"
            ? timeline.compactMap { item -> RuleOverride.Write? in
                guard item.event.kind == .policyReplaced, item.event.platform == rule.platform else { return nil }
                return RuleOverride.Write(at: item.at, actor: item.event.actor, fields: Set(item.event.changes.keys))
            }
            : Self.writes(to: version, of: rule.platform, in: timeline) { $0.actor }
        if let person = RuleOverride.overriding(rule, field: field, writes: writes) {
            let text = "\(summary); \(person.actor) changed \(field) at \(Timestamp.format(person.at)) after this rule did"
            try await record(entry(.standsAside, action, text), in: &context)
            return false
        }
        guard rule.definition.state == .live, context.preview == nil else {
            try await record(entry(.wouldAct, action, summary), in: &context)
            return false
        }
        var changed = context.app
        proposed(&changed)
        var reason = summary
        do {
            let report = try await backtest(appId, rule.platform, context.app, changed, now)
            reason += "; backtest over \(report.windowDays) days: \(report.changed) of \(report.installs) installs answered differently, "
                + "\(report.today.force) → \(report.proposed.force) forced"
        } catch {
            guard !backtestRequired else {
                try await record(entry(.failed, action, "\(summary); not done: the backtest failed (\(error))"), in: &context)
                return false
            }
            reason += "; the backtest failed (\(error)), the halt proceeds"
        }
        do {
            // The record goes in with the catalog event, in one transaction.
            let revision = try await write(String(reason.prefix(CatalogInput.maximumReasonLength)), now, entry(.acted, action, reason))
            Counter(label: "upshift_rule_actions_total", dimensions: [("action", action)], factory: metrics).increment()
            logger.notice(
                "rule acted",
                metadata: ["app": "\(appId)", "rule": "\(rule.id)", "action": "\(action)", "version": "\(name)", "revision": "\(revision)"])
            context.app = try await catalog.app(id: appId) ?? context.app
            context.timeline = nil
            return true
        } catch CatalogError.stale {
            // Written meanwhile: the next evaluation decides on the catalog as it is then.
            return false
        }
    }

    /// Tells `health.regressed` for `release`, once per rule and release (nothing in a preview).
    private func tellRegressed(_ rule: Rule, _ release: Release, summary: String, in context: AppContext) async throws {
        guard context.preview == nil, let webhooks else { return }
        let body = try CatalogCoding.json(
            RegressedBody(
                app: context.appId.rawValue, platform: rule.platform.rawValue, version: release.version.normalized, rule: rule.id,
                state: rule.definition.state.rawValue, summary: summary, at: Timestamp.format(context.now)))
        try await webhooks.regressed(
            app: context.appId, platform: rule.platform, rule: rule.id, version: release.version.normalized, summary: summary,
            body: body, now: context.now)
    }

    /// A `health.regressed` delivery's body (`WebhookHealthDelivery` in docs/openapi.yaml).
    struct RegressedBody: Encodable {
        var kind = WebhookKind.healthRegressed.rawValue
        let app: String
        let platform: String
        let version: String
        let rule: String
        let state: String
        let summary: String
        let at: String
    }

    /// The catalog's writes to the release `version` of `platform`, oldest first, each under the actor `actor`
    /// gives it.
    static func writes(
        to version: Version, of platform: Platform, in timeline: [(at: Date, event: CatalogEvent)], actor: (CatalogEvent) -> String
    ) -> [RuleOverride.Write] {
        timeline.compactMap { item in
            guard let written = item.event.release, written.platform == platform, written.version == version else { return nil }
            return RuleOverride.Write(at: item.at, actor: actor(item.event), fields: Set(item.event.changes.keys))
        }
    }

    private func timeline(_ context: inout AppContext) async throws -> [(at: Date, event: CatalogEvent)] {
        if let timeline = context.timeline { return timeline }
        let timeline = try await catalog.timeline(appId: context.appId)
        context.timeline = timeline
        return timeline
    }

    /// Appends `record` unless it says what the rule's last record for its release says (a skip: what its
    /// last record says, within the hour). An idle record is only worth writing after one that was not, or
    /// when `announced` (a release the rule will never act on, such as one without a baseline).
    private func record(
        _ record: RuleRecord, in context: inout AppContext, skip: Bool = false, announced: Bool = false
    ) async throws {
        if context.preview != nil {
            context.preview?.append(record)
            return
        }
        let appId = context.appId
        let last = try await records.last(
            appId: appId, platform: record.platform, ruleId: record.ruleId, version: skip ? nil : record.version)
        if skip {
            Counter(label: "upshift_rule_skips_total", factory: metrics).increment()
            if let last, last.outcome == .skipped, last.summary == record.summary, record.at.timeIntervalSince(last.at) < 3_600 {
                return
            }
        } else {
            guard !record.repeats(last) else { return }
            if record.outcome == .idle, last == nil, !announced { return }
        }
        try await records.append(record, appId: appId)
    }
}

/// The holds of the advance rules' last evaluation, per app and platform: release (`Version.normalized`) → why.
/// Before the first evaluation nothing is known, and the rollout worker leaves held schedules as they are.
final class ScheduleHolds: Sendable {
    private let book = Mutex<[AppID: [Platform: [String: String]]]?>(nil)

    func current(_ app: AppID, _ platform: Platform) -> [String: String]? {
        book.withLock { $0?[app]?[platform] }
    }

    func replace(with holds: [AppID: [Platform: [String: String]]]) {
        book.withLock { $0 = holds }
    }

    /// Why `version` is held now: nil before any evaluation, `.some(nil)` when it is not held.
    func reason(_ app: AppID, _ platform: Platform, _ version: Version) -> String?? {
        book.withLock { book in
            guard let book else { return nil }
            return .some(book[app]?[platform]?[version.normalized])
        }
    }
}
