//! The server's commands: COMMAND, INFO, CONFIG, DBSIZE, FLUSHDB/FLUSHALL.
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
    w: &mut Reply<'_>,
    held: Option<&mut Guard<'d>>,
    point: &mut dyn FnMut(),
) -> Res {
    let n = a.len();
    let nm = std::str::from_utf8(name).unwrap_or("?");
    match name {
        b"command" => {
            if a.first().is_some_and(|s| s.eq_ignore_ascii_case(b"count")) {
                w.int(COMMANDS.len() as i64);
            } else {
                w.array(0);
            }
        }
        b"info"
            if a.first()
                .is_some_and(|s| s.eq_ignore_ascii_case(b"commandstats")) =>
        {
            w.bulk(super::slowlog::commandstats(db).as_bytes());
        }
        b"info"
            if a.first()
                .is_some_and(|s| s.eq_ignore_ascii_case(b"latencystats")) =>
        {
            w.bulk(super::slowlog::latencystats(db).as_bytes());
        }
        b"info"
            if a.first()
                .is_some_and(|s| s.eq_ignore_ascii_case(b"scripttypes")) =>
        {
            // psp's own section: which script has which request type.
            let mut text = String::from("# Scripttypes\r\n");
            let typed = db.scripts().typed();
            for (slot, sha) in typed.iter().enumerate() {
                let name =
                    crate::resp::wire::TYPES[usize::from(crate::resp::wire::script_type(slot))];
                text.push_str(&format!("{name}:{}\r\n", String::from_utf8_lossy(sha)));
            }
            if typed.len() == crate::resp::wire::SCRIPT_TYPES - 1 {
                let last = crate::resp::wire::script_type(crate::resp::wire::SCRIPT_TYPES - 1);
                let name = crate::resp::wire::TYPES[usize::from(last)];
                text.push_str(&format!("{name}:every other script\r\n"));
            }
            w.bulk(text.as_bytes());
        }
        b"info" => {
            let s = db.stats();
            let text = format!(
                "# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\nserver:psp\r\n\r\n# Memory\r\nused_memory:{}\r\nmaxmemory:{}\r\nmaxmemory_policy:{}\r\n\r\n# Stats\r\nevicted_keys:{}\r\nexpired_keys:{}\r\n\r\n# Replication\r\nrole:master\r\n\r\n# Keyspace\r\ndb0:keys={},expires={},avg_ttl=0\r\n",
                s.used,
                db.config().max_memory,
                db.config().eviction.name(),
                s.evicted,
                s.expired,
                s.keys,
                s.volatile
            );
            w.bulk(text.as_bytes());
        }
        b"config" => {
            arity(n >= 1, nm)?;
            if a[0].eq_ignore_ascii_case(b"get") {
                arity(n >= 2, "config|get")?;
                let mut pairs: Vec<(&str, String)> = Vec::new();
                for p in &a[1..] {
                    if p.eq_ignore_ascii_case(b"maxmemory") {
                        pairs.push(("maxmemory", db.config().max_memory.to_string()));
                    } else if p.eq_ignore_ascii_case(b"maxmemory-policy") {
                        pairs.push(("maxmemory-policy", db.config().eviction.name().into()));
                    } else if p.eq_ignore_ascii_case(b"databases") {
                        pairs.push(("databases", "1".into()));
                    } else if p.eq_ignore_ascii_case(b"save") {
                        // No persistence (redis-benchmark asks).
                        pairs.push(("save", String::new()));
                    } else if p.eq_ignore_ascii_case(b"appendonly") {
                        pairs.push(("appendonly", "no".into()));
                    } else {
                        super::slowlog::config_get(db, p, &mut pairs);
                        super::scripting::config_get(db, p, &mut pairs);
                    }
                }
                w.map(pairs.len());
                for (k, v) in pairs {
                    w.bulk(k.as_bytes());
                    w.bulk(v.as_bytes());
                }
            } else if a[0].eq_ignore_ascii_case(b"set") && n == 3 {
                match super::slowlog::config_set(db, a[1], a[2])
                    .or_else(|| super::scripting::config_set(db, a[1], a[2]))
                {
                    Some(r) => {
                        r?;
                        w.ok();
                    }
                    None => {
                        return Err(Fail::Owned(
                            format!(
                                "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                                String::from_utf8_lossy(a[1])
                            )
                            .into_bytes(),
                        ));
                    }
                }
            } else {
                let mut msg = b"ERR unknown subcommand '".to_vec();
                msg.extend_from_slice(&a[0][..a[0].len().min(128)]);
                msg.extend_from_slice(b"'. Try CONFIG HELP.");
                return Err(Fail::Owned(msg));
            }
        }
        b"time" => {
            arity(n == 0, nm)?;
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            w.array(2);
            w.bulk(itoa::Buffer::new().format(t.as_secs()).as_bytes());
            w.bulk(itoa::Buffer::new().format(t.subsec_micros()).as_bytes());
        }
        b"dbsize" => {
            arity(n == 0, nm)?;
            w.int(db.len() as i64);
        }
        b"flushdb" | b"flushall" => {
            arity(n <= 1, nm)?;
            match held {
                Some(g) => g.clear_locked(),
                None => {
                    // All or nothing: refused at once while a script is
                    // busy, rather than stopped half way.
                    if db.scripts().any_busy() {
                        return Err(Fail::Msg(crate::busy::BUSY));
                    }
                    for i in 0..crate::db::SHARDS {
                        db.lock_shard_waiting(i).clear_locked();
                        point();
                    }
                }
            }
            w.ok();
        }
        _ => unreachable!("routed to server by name"),
    }
    Ok(())
}
