import BatonDurable
import Foundation
import Logging
import PostgresNIO

extension PostgresJobStore {
    /// Connects the hand-over to other stores: the listener gives it the notifications with a text and
    /// the server process it listens on, and offers of this store's idle workers are sent to the others.
    func connectOffers() {
        listener.setHandlers(
            message: { [weak self] payload in self?.message(payload) },
            listening: { [weak self] process in
                guard let self else { return }
                self.handoff.listening(as: process?.pid, started: process?.started ?? 0)
                // Offers are told once: a store that starts listening asks the others for theirs.
                if process != nil { self.send(["R" + self.handoff.key]) }
            })
        handoff.setPublisher { [weak self] offers in self?.publish(offers) }
    }

    /// A notification with a text on the wake-up channel: an idle worker's offer of another store
    /// (``RemoteOffer``, `O`), a store that started listening asking for the offers that stand (`R`),
    /// jobs handed over to a worker (``RemoteHand``, `H`: taken when they are for this store), or
    /// anything else (a wake-up).
    func message(_ payload: String) {
        switch payload.first {
        case "O":
            guard let offer = try? JSONDecoder().decode(RemoteOffer.self, from: Data(payload.utf8.dropFirst())) else {
                hub.wake()
                return
            }
            handoff.learn(offer)
        case "R":
            // Another store started listening and asks for the offers that stand.
            if payload.dropFirst() != handoff.key { handoff.reofferAll() }
        case "H":
            // Every store hears every hand-over: those for other stores are skipped unread.
            guard RemoteHand.target(of: payload[...]) == handoff.key[...] else { return }
            guard let (hand, run, ids) = RemoteHand.decode(payload[...]) else {
                logger.notice(
                    "a notification handing jobs over could not be read; they are claimed again when their leases expire",
                    metadata: ["notification": "\(payload.prefix(200))"])
                hub.wake()
                return
            }
            let (taken, rest) = handoff.receive(hand.claimed(run: run, ids: ids), for: hand.worker)
            if taken > 0 { hub.wake() }
            if !rest.isEmpty { Task { await self.giveBack(rest) } }
        default:
            hub.wake()
        }
    }

    /// Tells the other stores of this schema of idle workers' offers, in notifications on the
    /// wake-up channel. A failure is logged: the other stores' submissions then insert their jobs
    /// ready, as they would without an offer, or hand over jobs that this store gives back.
    func publish(_ offers: [RemoteOffer]) {
        let encoder = JSONEncoder()
        send(offers.compactMap { try? encoder.encode($0) }.map { "O" + String(decoding: $0, as: UTF8.self) })
    }

    /// Sends `texts` as notifications on the wake-up channel, in order, from a task of their own.
    func send(_ texts: [String]) {
        guard !texts.isEmpty else { return }
        Task { [client, channel, logger, configuration] in
            for text in texts {
                do {
                    try await PostgresTimeout.run(configuration.operationTimeout) {
                        _ = try await client.query("SELECT pg_notify(\(channel), \(text))", logger: logger).collect()
                    }
                } catch {
                    logger.debug(
                        "an idle worker's offer could not be sent to the other stores",
                        metadata: ["error": "\(PostgresFailure.describe(error))"])
                }
            }
        }
    }
}
