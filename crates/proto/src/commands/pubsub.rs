//! Pub/sub's commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE,
//! PUBLISH, PUBSUB CHANNELS/NUMSUB/NUMPAT, over the process's listeners
//! ([`crate::pubsub`]). A connection that listens to anything is in
//! Redis's subscribed state ([`Session::subscriptions`]): in RESP2 it may
//! then only (un)subscribe, PING, QUIT and RESET ([`refused_while_subscribed`]).
//!
//! Each command is one arm of [`run`], which [`super::run`] calls for
//! this family's commands (its column of `COMMANDS`); the arms keep
//! Redis 7's replies and error texts.

use super::*;
use crate::pubsub::{self, Kind};

/// Runs one of this family's commands (`name` is lowercase).
pub(super) fn run(name: &[u8], a: &[&[u8]], session: &mut Session, w: &mut Reply<'_>) -> Res {
    let registry = pubsub::registry();
    match name {
        b"subscribe" | b"psubscribe" => {
            // A connection's own: a request of no connection (the
            // in-process generator) has nowhere to receive.
            if session.id >> 32 == 0 {
                return Err(Fail::Msg(b"ERR pub/sub needs a connection"));
            }
            let (kind, action) = kind_of(name);
            for c in a {
                session.subscriptions = registry.subscribe(session.id, session.resp3, kind, c);
                pubsub::confirmation(w.out, w.resp3, action, Some(c), session.subscriptions);
            }
        }
        b"unsubscribe" | b"punsubscribe" => {
            let (kind, action) = kind_of(name);
            // None named: every one of the kind (Redis's null and the
            // count when there is none).
            let all;
            let names: Vec<&[u8]> = if a.is_empty() {
                all = if session.subscriptions == 0 {
                    Vec::new()
                } else {
                    registry.subscriptions(session.id, kind)
                };
                all.iter().map(|c| &**c).collect()
            } else {
                a.to_vec()
            };
            if names.is_empty() {
                pubsub::confirmation(w.out, w.resp3, action, None, session.subscriptions);
            }
            for c in names {
                session.subscriptions = registry.unsubscribe(session.id, kind, c);
                pubsub::confirmation(w.out, w.resp3, action, Some(c), session.subscriptions);
            }
        }
        b"publish" => {
            arity(a.len() == 2, "publish")?;
            w.int(registry.publish(a[0], a[1]) as i64);
        }
        b"pubsub" => {
            let sub = a[0].to_ascii_lowercase();
            match (sub.as_slice(), &a[1..]) {
                (b"channels", [] | [_]) => {
                    let channels = registry.channels(a.get(1).copied());
                    w.array(channels.len());
                    for c in &channels {
                        w.bulk(c);
                    }
                }
                (b"numsub", names) => {
                    w.array(2 * names.len());
                    for c in names {
                        w.bulk(c);
                        w.int(registry.numsub(c) as i64);
                    }
                }
                (b"numpat", []) => w.int(registry.numpat() as i64),
                // NUMPAT's arity is checked as a command's; CHANNELS's
                // extra words by the command, as Redis does.
                (b"numpat", _) => return Err(Fail::Arity("pubsub|numpat".into())),
                (b"channels", _) => {
                    return Err(Fail::Owned(
                        format!(
                            "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
                            String::from_utf8_lossy(a[0])
                        )
                        .into_bytes(),
                    ));
                }
                _ => return Err(unknown_subcommand(a[0], "PUBSUB")),
            }
        }
        _ => unreachable!("routed to pubsub by name"),
    }
    Ok(())
}

fn kind_of(name: &[u8]) -> (Kind, &'static [u8]) {
    match name {
        b"subscribe" => (Kind::Channel, b"subscribe"),
        b"unsubscribe" => (Kind::Channel, b"unsubscribe"),
        b"psubscribe" => (Kind::Pattern, b"psubscribe"),
        _ => (Kind::Pattern, b"punsubscribe"),
    }
}

/// Redis's refusal of `name` (lowercase; `raw` as sent) on a RESP2
/// connection in the subscribed state, if it is refused there.
pub(super) fn refused_while_subscribed(name: &[u8], raw: &[u8]) -> Option<Vec<u8>> {
    if matches!(
        name,
        b"subscribe"
            | b"unsubscribe"
            | b"psubscribe"
            | b"punsubscribe"
            | b"ssubscribe"
            | b"sunsubscribe"
            | b"ping"
            | b"quit"
            | b"reset"
    ) {
        return None;
    }
    let mut m = b"ERR Can't execute '".to_vec();
    m.extend(raw.iter().map(u8::to_ascii_lowercase));
    m.extend_from_slice(
        b"': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
    );
    Some(m)
}

/// PING on a RESP2 connection in the subscribed state: Redis's
/// two-element form.
pub(super) fn subscribed_ping(a: &[&[u8]], w: &mut Reply<'_>) {
    w.array(2);
    w.bulk(b"pong");
    w.bulk(a.first().copied().unwrap_or_default());
}
