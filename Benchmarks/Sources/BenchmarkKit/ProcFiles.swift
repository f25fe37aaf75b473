/// Readings of Linux's /proc files (proc(5)), from their text.
public enum ProcFiles {
    /// The machine's CPU time so far from /proc/stat's `cpu` line: busy and total ticks (idle and iowait
    /// are not busy).
    public static func cpuTicks(stat: String) throws(BenchParseError) -> CPUTicks {
        guard let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") }) else {
            throw BenchParseError("/proc/stat has no `cpu ` line")
        }
        // user nice system idle iowait irq softirq steal (guest time is counted in user already).
        let fields = line.split(separator: " ").dropFirst().prefix(8).compactMap { Int($0) }
        guard fields.count == 8 else { throw BenchParseError("/proc/stat: `\(line)` has fewer than 8 counters") }
        let total = fields.reduce(0, +)
        return CPUTicks(busy: total - fields[3] - fields[4], total: total)
    }

    /// CPU seconds (user and system) of a process from /proc/PID/stat, given the clock's ticks per second.
    public static func cpuSeconds(processStat: String, ticksPerSecond: Int) throws(BenchParseError) -> Double {
        // The command name, in parentheses, may hold spaces: fields count from after its last ")".
        guard let close = processStat.lastIndex(of: ")") else { throw BenchParseError("/proc/PID/stat has no `(comm)`") }
        let fields = processStat[processStat.index(after: close)...].split(separator: " ")
        // After "pid (comm)": state is the 1st, utime the 12th, stime the 13th.
        guard fields.count >= 13, let user = Int(fields[11]), let system = Int(fields[12]) else {
            throw BenchParseError("/proc/PID/stat has no utime and stime")
        }
        return Double(user + system) / Double(ticksPerSecond)
    }

    /// A `kB` line of /proc/PID/status, in kB: `VmHWM` (peak resident set) or `VmRSS`.
    public static func kilobytes(_ key: String, status: String) -> Int? {
        for line in status.split(separator: "\n") where line.hasPrefix(key + ":") {
            return line.dropFirst(key.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Int($0) }
        }
        return nil
    }

    /// The first `model name` of /proc/cpuinfo.
    public static func cpuModel(cpuinfo: String) -> String? {
        for line in cpuinfo.split(separator: "\n") where line.hasPrefix("model name") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            return line[line.index(after: colon)...].trimmingCharacters(in: " \t")
        }
        return nil
    }

    /// MemTotal of /proc/meminfo as "23.5 GiB".
    public static func memory(meminfo: String) -> String? {
        kilobytes("MemTotal", status: meminfo).map { Format.fixed(Double($0) / 1_048_576, 1) + " GiB" }
    }

    /// The three load averages of /proc/loadavg: "1.81 1.47 1.53".
    public static func load(loadavg: String) -> String {
        let fields = loadavg.split(separator: " ").prefix(3)
        return fields.count == 3 ? fields.joined(separator: " ") : "?"
    }
}

/// CPU time of the whole machine so far, in clock ticks.
public struct CPUTicks: Sendable, Equatable {
    public var busy: Int
    public var total: Int

    public init(busy: Int, total: Int) {
        self.busy = busy
        self.total = total
    }

    /// How busy all CPUs were from `self` to `later`, as "87%".
    public func busyShare(until later: CPUTicks) -> String {
        let total = later.total - self.total
        return Format.percent(total > 0 ? Double(later.busy - busy) / Double(total) : 0)
    }
}

/// What a run says about the machine: "2 CPUs (AMD EPYC), 23.5 GiB RAM, load 1.81 1.47 1.53".
public struct MachineDescription: Sendable, Equatable, CustomStringConvertible {
    public var cpus: Int
    public var cpuModel: String?
    public var memory: String?
    public var load: String

    public init(cpus: Int, cpuModel: String?, memory: String?, load: String) {
        self.cpus = cpus
        self.cpuModel = cpuModel
        self.memory = memory
        self.load = load
    }

    public var description: String {
        "\(cpus) CPUs (\(cpuModel ?? "unknown CPU")), \(memory ?? "unknown") RAM, load \(load)"
    }
}

extension Substring {
    func trimmingCharacters(in set: String) -> String {
        String(drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }
}
