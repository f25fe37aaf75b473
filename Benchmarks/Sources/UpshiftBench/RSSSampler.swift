import BenchmarkKit
import Foundation

/// Samples VmRSS of a process every second into a file ("epoch kB" lines, `RSSSamples`) until it exits or
/// the sampler is stopped.
final class RSSSampler: @unchecked Sendable {
    private let stopped = Protected(false)
    private let finished = DispatchSemaphore(value: 0)

    init(pid: Int32, file: String) {
        _ = FileManager.default.createFile(atPath: file, contents: nil)
        let thread = Thread { [stopped, finished] in
            defer { finished.signal() }
            guard let handle = FileHandle(forWritingAtPath: file) else { return }
            defer { try? handle.close() }
            while !stopped.withLock({ $0 }) {
                guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return }
                if let kilobytes = ProcFiles.kilobytes("VmRSS", status: status) {
                    let sample = RSSSamples.Sample(epoch: Date().timeIntervalSince1970, kilobytes: kilobytes)
                    handle.write(Data((sample.line + "\n").utf8))
                }
                Thread.sleep(forTimeInterval: 1)
            }
        }
        thread.start()
    }

    /// Stops sampling and waits for the last sample to be written.
    func stop() {
        stopped.withLock { $0 = true }
        finished.wait()
        finished.signal()
    }
}
