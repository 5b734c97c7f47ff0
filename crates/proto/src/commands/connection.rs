//! The connection's commands: PING, ECHO, QUIT, HELLO, AUTH, CLIENT, SELECT, RESET.
//!
//! Each command is one arm of [`run`], which [`super::run`] calls for
//! this family's commands (its column of `COMMANDS`); the arms keep
//! Redis 7's replies and error texts.

use super::*;

/// Runs one of this family's commands (`name` is lowercase).
pub(super) fn run(name: &[u8], a: &[&[u8]], session: &mut Session, w: &mut Reply<'_>) -> Res {
    let n = a.len();
    let nm = std::str::from_utf8(name).unwrap_or("?");
    match name {
        b"ping" => {
            arity(n <= 1, nm)?;
            match a.first() {
                Some(m) => w.bulk(m),
                None => w.simple(b"PONG"),
            }
        }
        b"echo" => {
            arity(n == 1, nm)?;
            w.bulk(a[0]);
        }
        b"quit" => w.ok(),
        b"hello" => hello(a, session, w)?,
        b"auth" => {
            arity(n == 1 || n == 2, nm)?;
            if n == 2 && a[0].eq_ignore_ascii_case(b"default") {
                // The default user has no password: it accepts any.
                w.ok();
            } else if n == 2 {
                return Err(Fail::Msg(
                    b"WRONGPASS invalid username-password pair or user is disabled.",
                ));
            } else {
                return Err(Fail::Msg(b"ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"));
            }
        }
        b"client" => client(a, session, w)?,
        b"select" => {
            arity(n == 1, nm)?;
            match parse_i64(a[0]) {
                None => return Err(Fail::Msg(NOT_INTEGER)),
                Some(0) => w.ok(),
                Some(_) => return Err(Fail::Msg(BAD_DB)),
            }
        }
        b"reset" => {
            if session.subscriptions > 0 {
                crate::pubsub::registry().forget(session.id);
            }
            *session = Session {
                id: session.id,
                ..Session::default()
            };
            w.resp3 = false;
            w.simple(b"RESET");
        }
        _ => unreachable!("routed to connection by name"),
    }
    Ok(())
}

fn hello(a: &[&[u8]], session: &mut Session, w: &mut Reply<'_>) -> Res {
    let mut proto = None;
    let mut i = 0;
    if let Some(v) = a.first() {
        match parse_i64(v) {
            Some(p @ (2 | 3)) => proto = Some(p),
            Some(_) => {
                return Err(Fail::Msg(b"NOPROTO unsupported protocol version"));
            }
            None => {
                return Err(Fail::Msg(
                    b"ERR Protocol version is not an integer or out of range",
                ));
            }
        }
        i = 1;
    }
    while i < a.len() {
        let opt = a[i].to_ascii_uppercase();
        match opt.as_slice() {
            b"AUTH" if i + 2 < a.len() => {
                // The default user has no password: it accepts any.
                if !a[i + 1].eq_ignore_ascii_case(b"default") {
                    return Err(Fail::Msg(
                        b"WRONGPASS invalid username-password pair or user is disabled.",
                    ));
                }
                i += 3;
            }
            b"SETNAME" if i + 1 < a.len() => {
                session.name = Some(a[i + 1].to_vec());
                i += 2;
            }
            _ => {
                return Err(Fail::Owned(
                    format!(
                        "ERR Syntax error in HELLO option '{}'",
                        String::from_utf8_lossy(&a[i][..a[i].len().min(64)])
                    )
                    .into_bytes(),
                ));
            }
        }
    }
    if let Some(p) = proto {
        session.resp3 = p == 3;
        w.resp3 = session.resp3;
    }
    w.map(7);
    w.bulk(b"server");
    w.bulk(b"redis");
    w.bulk(b"version");
    w.bulk(b"7.0.0");
    w.bulk(b"proto");
    w.int(if session.resp3 { 3 } else { 2 });
    w.bulk(b"id");
    w.int(session.client_id() as i64);
    w.bulk(b"mode");
    w.bulk(b"standalone");
    w.bulk(b"role");
    w.bulk(b"master");
    w.bulk(b"modules");
    w.array(0);
    Ok(())
}

fn client(a: &[&[u8]], session: &mut Session, w: &mut Reply<'_>) -> Res {
    arity(!a.is_empty(), "client")?;
    let sub = a[0].to_ascii_lowercase();
    match sub.as_slice() {
        b"setname" => {
            arity(a.len() == 2, "client|setname")?;
            if a[1].iter().any(|&b| b <= b' ' || b > b'~') {
                return Err(Fail::Msg(
                    b"ERR Client names cannot contain spaces, newlines or special characters.",
                ));
            }
            session.name = (!a[1].is_empty()).then(|| a[1].to_vec());
            w.ok();
        }
        b"getname" => match &session.name {
            Some(n) => w.bulk(n),
            None => w.nil(),
        },
        b"id" => w.int(session.client_id() as i64),
        b"setinfo" => {
            arity(a.len() == 3, "client|setinfo")?;
            w.ok();
        }
        b"info" => {
            let name = session.name.clone().unwrap_or_default();
            let mut s = format!("id={} name=", session.client_id()).into_bytes();
            s.extend_from_slice(&name);
            s.extend_from_slice(
                format!(" db=0 resp={}\n", if session.resp3 { 3 } else { 2 }).as_bytes(),
            );
            w.bulk(&s);
        }
        _ => return Err(unknown_subcommand(a[0], "CLIENT")),
    }
    Ok(())
}
