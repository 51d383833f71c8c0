//! Merged writes: small writes of one kind whose pieces waiting in one batch run as one
//! statement (see the parent module).

use std::any::{Any, TypeId};
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;

use sea_orm::sea_query::Alias;
use sea_orm::{
    ActiveModelTrait, ConnectionTrait, DatabaseExecutor, DbBackend, InsertMany, QueryTrait,
};
use tokio::sync::oneshot;
use uuid::Uuid;

use super::{Job, Writes, stopped};
use crate::{PersistenceError, Result};

/// A small write of which the writer runs every piece waiting in one batch together, in one
/// statement (or one per group of pieces that differ in what the statement shares); on SQLite
/// in two at most (see [`statement_sizes`]).
pub trait Merged: Send + Sync + Sized + 'static {
    /// What each piece answers its caller.
    type Answer: Send + 'static;

    /// Whether a piece's statements must commit together when it runs alone (as
    /// [`GroupCommit::write_atomic`]'s work).
    const ATOMIC: bool = false;

    /// Whether this piece's statements must commit together when it runs alone: as
    /// [`Merged::ATOMIC`], unless the piece says more (a fact written with its events, whose
    /// delivery rows must commit with it). Such a piece never runs in a batch without a
    /// transaction.
    fn atomic(&self) -> bool {
        Self::ATOMIC
    }

    /// Whether [`Merged::run_all`] runs `pieces` as one statement, or as statements in one call
    /// that commit together ([`crate::one_call`]). A batch of nothing but such pieces then runs
    /// without a transaction: the call is atomic by itself and commits alone, so the batch
    /// saves its `BEGIN` and `COMMIT` (two round trips, and on PostgreSQL two commands the
    /// server parses). False unless the kind says otherwise.
    fn one_statement(_pieces: &[&Self]) -> bool {
        false
    }

    /// Runs `pieces` (one or more) on `db` and answers each, in their order. Like any work it
    /// may run twice (see the module's description) and touches nothing but `db`.
    fn run_all<'e>(
        db: &'e DatabaseExecutor<'e>,
        pieces: Vec<&'e Self>,
    ) -> Writes<'e, Vec<Self::Answer>>;
}

/// A [`Merged`] piece and where its answer goes.
pub(super) struct Merging<W: Merged> {
    piece: W,
    result: Option<Result<W::Answer>>,
    done: oneshot::Sender<Result<W::Answer>>,
}

impl<W: Merged> Merging<W> {
    pub(super) fn new(piece: W, done: oneshot::Sender<Result<W::Answer>>) -> Self {
        Self {
            piece,
            result: None,
            done,
        }
    }
}

impl<W: Merged> Job for Merging<W> {
    fn atomic(&self) -> bool {
        self.piece.atomic()
    }

    fn kind(&self) -> Option<TypeId> {
        Some(TypeId::of::<W>())
    }

    fn one_statement_with(&self, others: &[Box<dyn Job>], backend: DbBackend) -> bool {
        let mut pieces = vec![&self.piece];
        for job in others {
            match (&**job as &dyn Any).downcast_ref::<Self>() {
                Some(merging) => pieces.push(&merging.piece),
                None => return false,
            }
        }
        !pieces.iter().any(|piece| piece.atomic())
            && statement_sizes(pieces.len(), backend).nth(1).is_none()
            && W::one_statement(&pieces)
    }

    fn run<'a>(
        &'a mut self,
        others: &'a mut [Box<dyn Job>],
        db: &'a DatabaseExecutor<'a>,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(async move {
            let others = others
                .iter_mut()
                .filter_map(|job| (&mut **job as &mut dyn Any).downcast_mut::<Self>());
            let mut all: Vec<&mut Self> = std::iter::once(self).chain(others).collect();
            let mut rest = all.as_mut_slice();
            for size in statement_sizes(rest.len(), db.get_database_backend()) {
                let (statement, after) = std::mem::take(&mut rest).split_at_mut(size);
                if !run_statement(db, statement).await {
                    return false;
                }
                rest = after;
            }
            true
        })
    }

    fn fail(&mut self, error: PersistenceError) {
        self.result = Some(Err(error));
    }

    fn answer(self: Box<Self>) {
        let result = self.result.unwrap_or_else(|| Err(stopped()));
        let _ = self.done.send(result);
    }
}

/// Pieces per statement on SQLite come in multiples of this, but for the rest of a batch.
const SQLITE_STEP: usize = 8;

/// How many pieces each statement of a kind's `n` pieces carries, in order. On SQLite, a
/// multiple of [`SQLITE_STEP`], then the rest (37 pieces: 32 and 5). The writer's connection
/// keeps every statement it prepared, one per number of pieces, and a multi-row statement
/// weighs on SQLite's memory by its rows: with any number up to [`super::MAX_BATCH`] (64
/// statements per kind) SQLite held 33–37 MiB at 100,000 new senders, with these 15 per kind
/// 12–19 MiB (benches/README.md, the twenty-eighth session). Powers of two (seven per kind)
/// would split a batch's pieces of one kind into as many as six statements, each a round trip
/// to the connection's thread; this is two at most. Elsewhere one statement carries them all
/// (PostgreSQL keeps its plans in the server, and each statement is a round trip over the
/// network).
pub(super) fn statement_sizes(n: usize, backend: DbBackend) -> impl Iterator<Item = usize> {
    let rest = if backend == DbBackend::Sqlite {
        n % SQLITE_STEP
    } else {
        0
    };
    [n - rest, rest].into_iter().filter(|&size| size > 0)
}

/// Runs the pieces of one statement and keeps each one's answer; answers whether they
/// succeeded.
async fn run_statement<W: Merged>(
    db: &DatabaseExecutor<'_>,
    pieces: &mut [&mut Merging<W>],
) -> bool {
    let answers = W::run_all(db, pieces.iter().map(|merging| &merging.piece).collect()).await;
    match answers {
        Ok(answers) if answers.len() == pieces.len() => {
            for (merging, answer) in pieces.iter_mut().zip(answers) {
                merging.result = Some(Ok(answer));
            }
            true
        }
        Ok(answers) => {
            let error = format!("{} answers for {} writes", answers.len(), pieces.len());
            for merging in pieces.iter_mut() {
                merging.result = Some(Err(custom(&error)));
            }
            false
        }
        Err(error) => {
            // Alone, the piece gets its own error; in a batch every piece runs
            // again alone, which replaces these.
            let shared = error.to_string();
            let mut pieces = pieces.iter_mut();
            if let Some(first) = pieces.next() {
                first.result = Some(Err(error));
            }
            for merging in pieces {
                merging.result = Some(Err(custom(&shared)));
            }
            false
        }
    }
}

fn custom(message: &str) -> PersistenceError {
    PersistenceError::Database(sea_orm::DbErr::Custom(message.to_owned()))
}

/// Runs `insert` (many rows whose `ON CONFLICT … DO NOTHING` skips those the database refuses)
/// and answers the `id`s of the rows it inserted: a row skipped conflicted with one stored
/// before or with an earlier row of the same statement.
///
/// # Errors
/// Fails on a database error.
pub(crate) async fn inserted_ids<A: ActiveModelTrait>(
    db: &impl ConnectionTrait,
    insert: InsertMany<A>,
) -> Result<HashSet<Uuid>> {
    let mut insert = insert.into_query();
    insert.returning_col(Alias::new("id"));
    let rows = db.query_all(&insert).await?;
    Ok(rows
        .iter()
        .map(|row| row.try_get::<Uuid>("", "id"))
        .collect::<std::result::Result<_, _>>()?)
}
