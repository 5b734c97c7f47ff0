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

/// A queued command, parsed once for EXEC's locks and its run.
struct Queued<'q> {
    /// Its row of [`COMMANDS`].
    index: Option<usize>,
    /// Its name in lower case.
    name: Vec<u8>,
    raw_name: &'q [u8],
    args: Args<'q>,
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
    // The shards of every key the block names (each command's, as the
    // table gives them, and the watched ones): the block runs as one
    // command on them, and the WATCH check sees what it runs on, while
    // other clients' commands on other shards go on. Every shard when a
    // command of the block may touch keys it does not name (a walk of the
    // keyspace, SORT's patterns, a script). A block that may grow the
    // data finds room first.
    // Each queued command parsed once: its table index, its name in lower
    // case, its words.
    let block: Vec<Option<Queued<'_>>> = queue
        .iter()
        .map(|req| {
            let cmd = parse(req).ok()?;
            let name = cmd.raw_name.to_ascii_lowercase();
            Some(Queued {
                index: spec_index(&name),
                name,
                raw_name: cmd.raw_name,
                args: cmd.args.collect(),
            })
        })
        .collect();
    let mut keys: Vec<&[u8]> = watched.iter().map(|(k, _)| &k[..]).collect();
    let mut every_shard = false;
    for q in block.iter().flatten() {
        match q.index.map(|i| &COMMANDS[i]) {
            Some(c) if c.family == Family::Sort => every_shard = true,
            Some(c) if c.names_its_keys() => keys.extend(c.keys(&q.args)),
            Some(c) if c.keyless => {}
            _ => every_shard = true,
        }
    }
    let locked = if every_shard {
        db.lock_all(true)
    } else {
        db.lock_keys(keys.iter().copied(), true)
    };
    let mut g = match locked {
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
    #[cfg(test)]
    EXEC_LOCKED.with(|f| {
        if let Some(f) = f.borrow_mut().as_mut() {
            f(&g);
        }
    });
    if watched.iter().any(|(k, v)| g.version(k) != *v) {
        w.nil_array();
        return Ok(());
    }
    w.array(block.len());
    for q in &block {
        let Some(q) = q else {
            w.error(b"ERR Protocol error");
            continue;
        };
        let start = w.out.len();
        if let Err(f) = super::run(
            q.index,
            &q.name,
            q.raw_name,
            &q.args,
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

/// A test's look at the locks an EXEC took.
#[cfg(test)]
type LockProbe = Box<dyn FnMut(&Guard<'_>)>;

#[cfg(test)]
thread_local! {
    /// A test's look at the locks an EXEC took, before its block runs.
    static EXEC_LOCKED: std::cell::RefCell<Option<LockProbe>> =
        const { std::cell::RefCell::new(None) };
}

#[cfg(test)]
mod tests {
    use super::EXEC_LOCKED;
    use crate::commands::{Session, execute};
    use crate::db::Db;
    use crate::resp::write_command;

    fn run(db: &Db, s: &mut Session, line: &str) -> String {
        let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let mut req = Vec::new();
        write_command(&words, &mut req);
        let mut out = Vec::new();
        execute(&req, db, s, &mut out, &mut || {}).expect("valid");
        String::from_utf8_lossy(&out).into_owned()
    }

    /// What an EXEC of `block` (after WATCH of `watched`, if any) held:
    /// for each of `probe`, whether its shard was locked.
    fn held_by_exec(db: &Db, watched: &str, block: &[&str], probe: &[&str]) -> Vec<bool> {
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let (out, keys): (_, Vec<String>) =
            (seen.clone(), probe.iter().map(|k| k.to_string()).collect());
        EXEC_LOCKED.with(|f| {
            *f.borrow_mut() = Some(Box::new(move |g| {
                *out.borrow_mut() = keys.iter().map(|k| g.holds(k.as_bytes())).collect();
            }))
        });
        let mut s = Session::default();
        if !watched.is_empty() {
            run(db, &mut s, &format!("WATCH {watched}"));
        }
        run(db, &mut s, "MULTI");
        for line in block {
            assert_eq!(run(db, &mut s, line), "+QUEUED\r\n", "{line}");
        }
        assert!(run(db, &mut s, "EXEC").starts_with('*'));
        EXEC_LOCKED.with(|f| f.borrow_mut().take());
        seen.take()
    }

    /// EXEC holds the shards of the keys its block names (and the watched
    /// ones), not every shard; a block with a command that may touch keys
    /// it does not name holds them all.
    #[test]
    fn exec_locks_the_shards_of_the_keys_its_block_names() {
        let db = Db::default();
        // Keys of four different shards, none ZUNIONSTORE's destination's
        // (the shards are the hasher's, seeded per database).
        let mut keys: Vec<String> = vec!["dst".into()];
        for i in 0.. {
            let k = format!("k{i}");
            if keys
                .iter()
                .all(|o| db.shard_of(o.as_bytes()) != db.shard_of(k.as_bytes()))
            {
                keys.push(k);
            }
            if keys.len() == 5 {
                break;
            }
        }
        let [a, b, w, other] = [&keys[1], &keys[2], &keys[3], &keys[4]];
        let probe = [a.as_str(), b.as_str(), w.as_str(), other.as_str()];
        let block = [
            format!("INCR {a}"),
            format!("ZUNIONSTORE dst 1 {b}"),
            "PING".into(),
        ];
        let block: Vec<&str> = block.iter().map(String::as_str).collect();
        let held = held_by_exec(&db, w, &block, &probe);
        assert_eq!(held, [true, true, true, false], "{probe:?}");
        let walk = [format!("INCR {a}"), "KEYS *".into()];
        let walk: Vec<&str> = walk.iter().map(String::as_str).collect();
        assert_eq!(held_by_exec(&db, "", &walk, &probe), [true; 4]);
    }
}
