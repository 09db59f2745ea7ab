import Baton

/// `group` (Baton only): one `GroupJob` with n children (no dependencies, synchronous bodies), given
/// before the group starts. The report shows its cost against plain `independent`: a group's
/// bookkeeping (children, failures, weighted progress) must stay constant per child.
enum GroupWorkload {
    static var group: Workload {
        Workload(
            name: "group",
            summary: "Baton only: one GroupJob with n children (synchronous bodies, one atomic add), default width",
            runners: [.baton: baton]
        )
    }

    static func baton(_ n: Int) -> Sample {
        let counter = Counter()
        var sample = measure {
            let queue = JobQueue(name: "group")
            let children = (0..<n).map { _ in BlockJob { counter.increment() } as Job }
            let group = GroupJob(name: "group", children: children)
            queue.add(group)
            group.waitUntilFinished()
            return queue
        }
        sample.problem = counter.check(n)
        return sample
    }
}
