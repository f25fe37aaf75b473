import Testing

@testable import BenchmarkKit

@Suite struct ProcFilesTests {
    @Test func readsTheMachinesCPUTime() throws {
        let ticks = try ProcFiles.cpuTicks(stat: Recorded.text("proc/stat"))
        // user nice system idle iowait irq softirq steal: busy leaves idle and iowait out.
        let total = 968_019 + 107 + 146_219 + 271_025 + 5381 + 0 + 12_620 + 330
        #expect(ticks == CPUTicks(busy: total - 271_025 - 5381, total: total))
    }

    @Test func busyShareIsOfTheTicksBetweenTwoReadings() {
        let before = CPUTicks(busy: 1000, total: 2000)
        #expect(before.busyShare(until: CPUTicks(busy: 1870, total: 3000)) == "87%")
        #expect(before.busyShare(until: before) == "0%")
    }

    @Test func readsAProcessCPUSecondsAndMemory() throws {
        // utime 62 and stime 775 ticks, at 100 ticks per second.
        #expect(try ProcFiles.cpuSeconds(processStat: Recorded.text("proc/pid-stat"), ticksPerSecond: 100) == 8.37)
        let status = try Recorded.text("proc/pid-status")
        #expect(ProcFiles.kilobytes("VmHWM", status: status) == 45_868)
        #expect(ProcFiles.kilobytes("VmRSS", status: status) == 45_868)
        #expect(ProcFiles.kilobytes("VmSwap", status: status) == nil)
    }

    /// The command name may hold spaces and parentheses: fields count from its last ")".
    @Test func readsAProcessWhoseNameHasSpaces() throws {
        let stat = "4242 (upshift (serve) x) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0"
        #expect(try ProcFiles.cpuSeconds(processStat: stat, ticksPerSecond: 100) == 3.0)
    }

    @Test func describesTheMachine() throws {
        let machine = MachineDescription(
            cpus: 2, cpuModel: ProcFiles.cpuModel(cpuinfo: try Recorded.text("proc/cpuinfo")),
            memory: ProcFiles.memory(meminfo: try Recorded.text("proc/meminfo")),
            load: ProcFiles.load(loadavg: try Recorded.text("proc/loadavg")))
        #expect(machine.description == "2 CPUs (AMD EPYC), 23.5 GiB RAM, load 4.94 4.42 3.79")
        #expect(MachineDescription(cpus: 1, cpuModel: nil, memory: nil, load: "?").description
            == "1 CPUs (unknown CPU), unknown RAM, load ?")
    }
}
