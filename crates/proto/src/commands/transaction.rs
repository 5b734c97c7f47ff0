//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! Each command is one arm of [`run`], which [`super::run`] calls for
//! this family's commands (its column of `COMMANDS`); the arms keep
//! Redis 7's replies and error texts.

use super::*;

/// Runs one of this family's commands (`name` is lowercase).
pub(super) fn run<'d>(
    name: &[u8],
    a: &[&[u8]],
    db: &'d Db,
    session: &mut Session,
    w: &mut Reply<'_>,
    mut held: Option<&mut Guard<'d>>,
    point: &mut dyn FnMut(),
) -> Res {
    let n = a.len();
    let nm = std::str::from_utf8(name).unwrap_or("?");
    match name {
        b"multi" => {
            arity(n == 0, nm)?;
            if session.multi.is_some() {
                return Err(Fail::Msg(b"ERR MULTI calls can not be nested"));
            }
            session.multi = Some(Vec::new());
            session.multi_bytes = 0;
            session.multi_failed = false;
            w.ok();
        }
        b"discard" => {
            arity(n == 0, nm)?;
            if session.multi.take().is_none() {
                return Err(Fail::Msg(b"ERR DISCARD without MULTI"));
            }
            session.watched.clear();
            w.ok();
        }
        b"exec" => {
            arity(n == 0, nm)?;
            exec(db, session, w, point)?;
        }
        b"watch" => {
            arity(n >= 1, nm)?;
            if session.multi.is_some() {
                return Err(Fail::Msg(b"ERR WATCH inside MULTI is not allowed"));
            }
            let mut g = lock(db, &mut held, a, false)?;
            for k in a {
                let v = g.version(k);
                session.watched.push((Box::from(*k), v));
            }
            w.ok();
        }
        b"unwatch" => {
            session.watched.clear();
            w.ok();
        }
        _ => unreachable!("routed to transaction by name"),
    }
    Ok(())
}

fn exec(db: &Db, session: &mut Session, w: &mut Reply<'_>, point: &mut dyn FnMut()) -> Res {
    let Some(queue) = session.multi.take() else {
        return Err(Fail::Msg(b"ERR EXEC without MULTI"));
    };
    let watched = std::mem::take(&mut session.watched);
    if session.multi_failed {
        session.multi_failed = false;
        return Err(Fail::Msg(
            b"EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    // Every shard: the block runs as one command, and the WATCH check sees
    // what it runs on. A block that may grow the data finds room first.
    let mut g = match db.lock_all(true) {
        Ok(g) => g,
        // Redis's words for a transaction that meets a busy script.
        Err(crate::db::Refused::Busy) => {
            return Err(Fail::Owned(
                [
                    &b"EXECABORT Transaction discarded because of: "[..],
                    crate::busy::BUSY,
                ]
                .concat(),
            ));
        }
        Err(refused) => return Err(refused.into()),
    };
    if watched.iter().any(|(k, v)| g.version(k) != *v) {
        w.nil_array();
        return Ok(());
    }
    w.array(queue.len());
    for req in &queue {
        let Ok(cmd) = parse(req) else {
            w.error(b"ERR Protocol error");
            continue;
        };
        let args: Args<'_> = cmd.args.collect();
        let name = cmd.raw_name.to_ascii_lowercase();
        let start = w.out.len();
        if let Err(f) = super::run(
            super::spec_index(&name),
            &name,
            cmd.raw_name,
            &args,
            db,
            session,
            w,
            Some(&mut g),
            point,
        ) {
            w.out.truncate(start);
            write_fail(w, f);
        }
    }
    Ok(())
}
