//! Merged pieces: one statement (or, on SQLite, a multiple of eight and the rest) per kind in a
//! batch, with or without a transaction, and what a failing one leaves.

use super::*;

/// A key to insert, merged with the others of its batch into one multi-row INSERT; answers
/// how many keys that statement inserted.
struct Put(i64);

impl Merged for Put {
    type Answer = usize;

    fn run_all<'e>(db: &'e DatabaseExecutor<'e>, pieces: Vec<&'e Self>) -> Writes<'e, Vec<usize>> {
        Box::pin(async move {
            let keys: Vec<i64> = pieces.iter().map(|put| put.0).collect();
            insert_keys(db, &keys).await?;
            Ok(vec![pieces.len(); pieces.len()])
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_pieces_of_one_batch_run_as_one_statement_beside_other_work() {
    let (_dir, db, writer) = fresh().await;
    // Ordinary writes (odd keys) and merged pieces (even keys) in one batch.
    let results = one_batch_of(&writer, 1..=16, |writer, k| async move {
        if k % 2 == 0 {
            writer.write_merged(Put(k)).await
        } else {
            writer.write(insert(k)).await.map(|()| 1)
        }
    })
    .await;
    for (k, result) in results {
        let expected = if k % 2 == 0 { 8 } else { 1 };
        assert_eq!(result.expect("committed"), expected, "key {k}");
    }
    assert_eq!(keys(&db).await, (1..=16).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_pieces_of_one_kind_run_in_statements_of_eights_and_the_rest() {
    let (_dir, db, writer) = fresh().await;
    let results = one_batch_of(&writer, 1..=13, |writer, k| async move {
        writer.write_merged(Put(k)).await
    })
    .await;
    let mut carried: Vec<usize> = results
        .into_iter()
        .map(|(k, result)| result.unwrap_or_else(|error| panic!("key {k}: {error}")))
        .collect();
    carried.sort_unstable();
    // 13 pieces: statements of 8 and 5, each piece answering the size of its own.
    assert_eq!(carried, [vec![5; 5], vec![8; 8]].concat());
    assert_eq!(keys(&db).await, (1..=13).collect::<Vec<_>>());
}

#[test]
fn statements_on_sqlite_carry_eights_and_the_rest_and_elsewhere_everything() {
    let sizes =
        |n, backend| crate::group_commit::merged::statement_sizes(n, backend).collect::<Vec<_>>();
    assert_eq!(sizes(37, DbBackend::Sqlite), vec![32, 5]);
    assert_eq!(sizes(64, DbBackend::Sqlite), vec![64]);
    assert_eq!(sizes(63, DbBackend::Sqlite), vec![56, 7]);
    assert_eq!(sizes(5, DbBackend::Sqlite), vec![5]);
    assert_eq!(sizes(0, DbBackend::Sqlite), Vec::<usize>::new());
    assert_eq!(sizes(37, DbBackend::Postgres), vec![37]);
    // Every size of a full batch's pieces is one of 15 statements.
    let mut all: Vec<usize> = (1..=MAX_BATCH)
        .flat_map(|n| sizes(n, DbBackend::Sqlite))
        .collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        all,
        [(1..8).collect::<Vec<_>>(), (8..=64).step_by(8).collect()].concat()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_merged_piece_fails_alone_and_the_others_are_committed() {
    let (_dir, db, writer) = fresh().await;
    writer.write(insert(6)).await.expect("committed");
    let results = one_batch_of(&writer, 1..=10, |writer, k| async move {
        writer.write_merged(Put(k)).await
    })
    .await;
    for (k, result) in results {
        if k == 6 {
            assert!(
                matches!(result, Err(PersistenceError::Conflict(_))),
                "{result:?}"
            );
        } else {
            // Run again alone, each in a statement of its own.
            assert_eq!(result.expect("committed"), 1, "key {k}");
        }
    }
    assert_eq!(keys(&db).await, (1..=10).collect::<Vec<_>>());
}

/// As [`Put`], for a kind that says its pieces make one statement; answers how many keys the
/// statement inserted and whether it ran in a transaction.
struct Single(i64);

impl Merged for Single {
    type Answer = (usize, bool);

    fn one_statement(_pieces: &[&Self]) -> bool {
        true
    }

    fn run_all<'e>(
        db: &'e DatabaseExecutor<'e>,
        pieces: Vec<&'e Self>,
    ) -> Writes<'e, Vec<(usize, bool)>> {
        Box::pin(async move {
            let puts: Vec<Put> = pieces.iter().map(|single| Put(single.0)).collect();
            let inserted = Put::run_all(db, puts.iter().collect()).await?;
            let in_transaction = matches!(db, DatabaseExecutor::Transaction(_));
            Ok(inserted.into_iter().map(|n| (n, in_transaction)).collect())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_is_one_statement_runs_without_a_transaction() {
    let (_dir, db, writer) = fresh().await;
    let results = one_batch_of(&writer, 1..=8, |writer, k| async move {
        writer.write_merged(Single(k)).await
    })
    .await;
    for (k, result) in results {
        assert_eq!(result.expect("committed"), (8, false), "key {k}");
    }
    // Beside other work, the batch is a transaction again.
    let results = one_batch_of(&writer, 9..=24, |writer, k| async move {
        if k % 2 == 0 {
            writer.write_merged(Single(k)).await
        } else {
            writer.write(insert(k)).await.map(|()| (1, true))
        }
    })
    .await;
    for (k, result) in results {
        let expected = if k % 2 == 0 { 8 } else { 1 };
        assert_eq!(result.expect("committed"), (expected, true), "key {k}");
    }
    // Pieces that make two statements on SQLite (8 and 2) commit together in a transaction.
    let results = one_batch_of(&writer, 25..=34, |writer, k| async move {
        writer.write_merged(Single(k)).await
    })
    .await;
    let mut carried: Vec<(usize, bool)> = results
        .into_iter()
        .map(|(k, result)| result.unwrap_or_else(|error| panic!("key {k}: {error}")))
        .collect();
    carried.sort_unstable();
    assert_eq!(carried, [vec![(2, true); 2], vec![(8, true); 8]].concat());
    assert_eq!(keys(&db).await, (1..=34).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_statement_without_a_transaction_leaves_its_pieces_to_run_alone() {
    let (_dir, db, writer) = fresh().await;
    writer.write(insert(4)).await.expect("committed");
    let results = one_batch_of(&writer, 1..=8, |writer, k| async move {
        writer.write_merged(Single(k)).await
    })
    .await;
    for (k, result) in results {
        if k == 4 {
            assert!(
                matches!(result, Err(PersistenceError::Conflict(_))),
                "{result:?}"
            );
        } else {
            assert_eq!(result.expect("committed"), (1, false), "key {k}");
        }
    }
    assert_eq!(keys(&db).await, (1..=8).collect::<Vec<_>>());
}
