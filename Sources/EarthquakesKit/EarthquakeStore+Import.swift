import GRDB

extension EarthquakeStore {
    /// Inserts new earthquakes and updates known ones (matched by ``Earthquake/id``), in one
    /// transaction.
    ///
    /// The import is all-or-nothing: if any row is refused (for example a latitude outside
    /// -90...90) or the disk fails, the transaction is rolled back and the table is exactly as
    /// it was before the call. A row whose stored value is already identical is counted as
    /// unchanged and not rewritten. When `quakes` holds the same id twice, the later one wins.
    ///
    /// - Parameter quakes: the earthquakes to store, typically ``Feed/earthquakes``.
    /// - Returns: how many rows were inserted, updated and left unchanged.
    /// - Throws: ``StoreError`` with code ``StoreError/Code/write``, naming the refused row.
    /// - Complexity: O(*n* log *m*) for *n* quakes into a table of *m* rows.
    @discardableResult
    public func importFeed(_ quakes: [Earthquake]) throws(StoreError) -> ImportSummary {
        do {
            return try database.write { db in try Self.upsert(quakes, in: db) }
        } catch {
            throw StoreError(
                .write, path: path, doing: "import \(quakes.count) earthquakes into", error: error,
                advice: "Nothing was changed: the import was rolled back."
            )
        }
    }

    /// Imports every earthquake of a parsed feed. See ``importFeed(_:)-([Earthquake])``.
    @discardableResult
    public func importFeed(_ feed: Feed) throws(StoreError) -> ImportSummary {
        try importFeed(feed.earthquakes)
    }

    /// The body of the import transaction.
    private static func upsert(_ quakes: [Earthquake], in db: Database) throws -> ImportSummary {
        let columns = Earthquake.columns
        let select = try db.cachedStatement(sql: "SELECT * FROM earthquake WHERE id = ?")
        let insert = try db.cachedStatement(
            sql:
                "INSERT INTO earthquake (\(columns.joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))"
        )
        let update = try db.cachedStatement(
            sql: "UPDATE earthquake SET \(columns.dropFirst().map { "\($0) = ?" }.joined(separator: ", ")) WHERE id = ?"
        )

        var summary = ImportSummary()
        for (index, quake) in quakes.enumerated() {
            let incoming = quake.asStored
            do {
                if let row = try Row.fetchOne(select, arguments: [quake.id]) {
                    if Earthquake(row: row) == incoming {
                        summary.unchanged += 1
                    } else {
                        // `columns` without the id, then the id for the WHERE clause.
                        let values = incoming.databaseValues
                        try update.execute(arguments: StatementArguments(values.dropFirst() + [values[0]]))
                        summary.updated += 1
                    }
                } else {
                    try insert.execute(arguments: StatementArguments(incoming.databaseValues))
                    summary.inserted += 1
                }
            } catch {
                throw RowFailure(index: index, id: quake.id, underlying: error)
            }
        }
        return summary
    }
}
