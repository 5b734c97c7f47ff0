//! EVAL, EVALSHA and SCRIPT LOAD/EXISTS/FLUSH: Lua 5.1 scripts as Redis 7
//! runs them, with `redis.call`/`redis.pcall`, KEYS and ARGV, Redis's
//! conversions both ways and its error texts.
//!
//! A script is atomic: it runs under the locks of the shards of the keys it
//! declares (inside `EXEC`, under the transaction's), so no other command
//! touches those keys meanwhile, and commands on other keys go on (where
//! redis-server stops everything). A `redis.call` on a key it did not
//! declare is refused (Redis requires the declaration too, and enforces it
//! in a cluster); so are the commands that walk the keyspace or manage the
//! connection. Each worker thread has its own Lua state, made on its first
//! script, with the table, string and math libraries, and caches each
//! script's compiled function by its SHA1, in at most
//! [`SCRIPT_MEMORY_BYTES`]. A script runs until it ends, as in Redis: one
//! past `busy-reply-threshold` makes the commands that wait for its keys
//! answer BUSY, and `SCRIPT KILL` stops it if it has not written
//! ([`crate::busy`]).
//!
//! Scripts run on a 1 MiB stack of their own (a worker may be a fiber with
//! a 64 KiB one). It must not take locks beyond the declared keys', or call
//! a preemption point while it holds them.

#[path = "bit.rs"]
mod bit;
#[path = "cjson.rs"]
mod cjson;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, LazyLock};

use mlua::{HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Value, VmState};
use parking_lot::Mutex;

use super::{Fail, Guard, Reply, Res, Session, lock, parse_i64, spec};
use crate::busy::{Kill, MAX_BUSY_REPLY_THRESHOLD_MS, ScriptRun};
use crate::db::Db;

/// Scripts kept by SHA1 (`SCRIPT LOAD`, and every `EVAL`): past this many,
/// the cache is emptied before the next is added (clients then get
/// NOSCRIPT and send the script again, as after `SCRIPT FLUSH`).
pub const MAX_SCRIPTS: usize = 10_000;

/// How often (in Lua instructions) a running script looks whether
/// `SCRIPT KILL` asked it to stop.
const KILL_CHECK_EVERY: u32 = 10_000;

/// The memory one worker thread's Lua state may hold (scripts and their
/// data together).
pub const SCRIPT_MEMORY_BYTES: usize = 64 << 20;

/// The stack a script runs on (Lua bounds its C recursion at 200 levels).
const SCRIPT_STACK_BYTES: usize = 1 << 20;

/// Nesting of tables converted to a reply, at most (deeper: nil).
const MAX_DEPTH: usize = 64;

/// The scripts, by the hex SHA1 of their text: shared by every connection.
static SCRIPTS: LazyLock<Mutex<HashMap<String, Arc<[u8]>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

thread_local! {
    /// This worker thread's Lua state.
    static VM: RefCell<Option<Vm>> = const { RefCell::new(None) };
}

const NOT_ALLOWED: &[u8] = b"ERR This Redis command is not allowed from script";

/// EVAL, EVALSHA, SCRIPT.
pub(super) fn run<'d>(
    name: &[u8],
    a: &[&[u8]],
    db: &'d Db,
    session: &mut Session,
    w: &mut Reply<'_>,
    held: Option<&mut Guard<'d>>,
) -> Res {
    match name {
        b"script" => script(a, db, w),
        _ => eval(name == b"evalsha", a, db, session, w, held),
    }
}

/// The hex SHA1 Redis names a script by.
fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// Keeps `body` under `sha`.
fn remember(sha: &str, body: &[u8]) {
    let mut scripts = SCRIPTS.lock();
    if !scripts.contains_key(sha) {
        if scripts.len() >= MAX_SCRIPTS {
            scripts.clear();
        }
        scripts.insert(sha.to_owned(), body.into());
    }
}

fn script(a: &[&[u8]], db: &Db, w: &mut Reply<'_>) -> Res {
    let sub = a[0].to_ascii_lowercase();
    match (&sub[..], a.len()) {
        (b"load", 2) => {
            let sha = sha1_hex(a[1]);
            remember(&sha, a[1]);
            w.bulk(sha.as_bytes());
        }
        (b"exists", 2..) => {
            let scripts = SCRIPTS.lock();
            w.array(a.len() - 1);
            for sha in &a[1..] {
                let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                w.int(i64::from(scripts.contains_key(&sha)));
            }
        }
        (b"load", _) | (b"exists", _) => {
            return Err(Fail::Owned(
                format!(
                    "ERR wrong number of arguments for 'script|{}' command",
                    String::from_utf8_lossy(&sub)
                )
                .into_bytes(),
            ));
        }
        (b"kill", 1) => match db.scripts().kill() {
            Kill::Killed => w.ok(),
            Kill::NotBusy => return Err(Fail::Msg(b"NOTBUSY No scripts in execution right now.")),
            Kill::Unkillable => return Err(Fail::Msg(
                b"UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.",
            )),
        },
        (b"flush", _) => {
            if a.len() > 2
                || a.len() == 2
                    && !a[1].eq_ignore_ascii_case(b"async")
                    && !a[1].eq_ignore_ascii_case(b"sync")
            {
                return Err(Fail::Msg(
                    b"ERR SCRIPT FLUSH only support SYNC|ASYNC option",
                ));
            }
            SCRIPTS.lock().clear();
            VM.with(|vm| {
                if let Some(vm) = vm.borrow_mut().as_mut() {
                    vm.functions.clear();
                }
            });
            w.ok();
        }
        _ => {
            return Err(Fail::Owned(
                format!(
                    "ERR unknown subcommand '{}'. Try SCRIPT HELP.",
                    String::from_utf8_lossy(a[0])
                )
                .into_bytes(),
            ));
        }
    }
    Ok(())
}

fn eval<'d>(
    by_sha: bool,
    a: &[&[u8]],
    db: &'d Db,
    session: &mut Session,
    w: &mut Reply<'_>,
    mut held: Option<&mut Guard<'d>>,
) -> Res {
    let numkeys = parse_i64(a[1]).ok_or(Fail::Msg(super::NOT_INTEGER))?;
    if numkeys < 0 {
        return Err(Fail::Msg(b"ERR Number of keys can't be negative"));
    }
    let rest = &a[2..];
    let numkeys = usize::try_from(numkeys).unwrap_or(usize::MAX);
    if numkeys > rest.len() {
        return Err(Fail::Msg(
            b"ERR Number of keys can't be greater than number of args",
        ));
    }
    let (keys, argv) = rest.split_at(numkeys);
    let (sha, body): (String, Arc<[u8]>) = if by_sha {
        let sha = String::from_utf8_lossy(a[0]).to_ascii_lowercase();
        match SCRIPTS.lock().get(&sha) {
            Some(body) => (sha, body.clone()),
            None => return Err(Fail::Msg(b"NOSCRIPT No matching script. Please use EVAL.")),
        }
    } else {
        let sha = sha1_hex(a[0]);
        remember(&sha, a[0]);
        (sha, a[0].into())
    };
    let mut locks = lock(db, &mut held, keys, true)?;
    let running = db.scripts().start(locks.shard_set());
    // On a stack of its own: the worker may be a fiber whose stack Lua's C
    // recursion (pcall, the parser: up to 200 levels) would overflow.
    stacker::grow(SCRIPT_STACK_BYTES, || {
        VM.with(|vm| {
            let mut vm = vm.borrow_mut();
            let vm = match vm.as_mut() {
                Some(vm) => vm,
                None => vm.insert(Vm::new().map_err(lua_fail)?),
            };
            let mut ctx = Ctx {
                guard: &mut locks,
                db,
                session,
                scratch: Vec::new(),
                failed: None,
                run: &running.run,
            };
            vm.run(&sha, &body, keys, argv, &mut ctx, w)
        })
    })
}

/// A Lua error that is not a script's: the state could not be set up.
fn lua_fail(e: mlua::Error) -> Fail {
    Fail::Owned(format!("ERR {e}").into_bytes())
}

/// What `redis.call` needs while a script runs.
struct Ctx<'g, 'd> {
    guard: &'g mut Guard<'d>,
    db: &'d Db,
    session: &'g mut Session,
    /// A command's RESP2 reply, read back into Lua.
    scratch: Vec<u8>,
    /// The error a `redis.call` raised, and the script's line: the script's
    /// reply if the error ends it.
    failed: Option<(Vec<u8>, i64)>,
    /// The script's flags in the database's registry (killed, wrote).
    run: &'g Arc<ScriptRun>,
}

/// One worker thread's Lua state.
struct Vm {
    lua: Lua,
    /// Compiled scripts by SHA1.
    functions: HashMap<String, mlua::Function>,
    /// The running script's flags, for the hook.
    current: Rc<RefCell<Option<Arc<ScriptRun>>>>,
    /// Where `SCRIPT KILL` stopped the running script (its line), if it did.
    killed_at: Rc<Cell<Option<i64>>>,
}

impl Vm {
    fn new() -> mlua::Result<Self> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        // A script's memory is bounded: past it, its allocation fails with
        // Lua's "not enough memory", an error reply.
        lua.set_memory_limit(SCRIPT_MEMORY_BYTES)?;
        let redis = lua.create_table()?;
        redis.set(
            "status_reply",
            lua.create_function(|lua, s: mlua::String| {
                let t = lua.create_table()?;
                t.set("ok", s)?;
                Ok(t)
            })?,
        )?;
        redis.set(
            "error_reply",
            lua.create_function(|lua, s: mlua::String| {
                let t = lua.create_table()?;
                t.set("err", s)?;
                Ok(t)
            })?,
        )?;
        redis.set(
            "sha1hex",
            lua.create_function(|_, s: mlua::String| Ok(sha1_hex(&s.as_bytes())))?,
        )?;
        redis.set("log", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
        for (i, level) in ["LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"]
            .iter()
            .enumerate()
        {
            redis.set(*level, i)?;
        }
        lua.globals().set("redis", redis)?;
        cjson::install(&lua)?;
        bit::install(&lua)?;
        let vm = Self {
            lua,
            functions: HashMap::new(),
            current: Rc::default(),
            killed_at: Rc::default(),
        };
        vm.watch_for_kill();
        Ok(vm)
    }

    /// Every [`KILL_CHECK_EVERY`] instructions, looks whether `SCRIPT KILL`
    /// asked the running script to stop. Once it has, the script fails on
    /// every line it reaches (as Redis does), so that a `pcall` in it
    /// cannot catch the error and go on.
    fn watch_for_kill(&self) {
        let current = self.current.clone();
        let killed_at = self.killed_at.clone();
        self.lua.set_hook(
            HookTriggers::new().every_nth_instruction(KILL_CHECK_EVERY),
            move |lua, debug| {
                if !current.borrow().as_ref().is_some_and(|r| r.killed()) {
                    return Ok(VmState::Continue);
                }
                killed_at.set(Some(i64::from(debug.curr_line())));
                lua.set_hook(HookTriggers::new().every_line(), |_, _| Err(killed()));
                Err(killed())
            },
        );
    }

    /// Runs the script `body` (named `sha`) with `keys` and `argv`,
    /// writing its reply.
    fn run(
        &mut self,
        sha: &str,
        body: &[u8],
        keys: &[&[u8]],
        argv: &[&[u8]],
        ctx: &mut Ctx<'_, '_>,
        w: &mut Reply<'_>,
    ) -> Res {
        let lua = &self.lua;
        let f = match self.functions.get(sha) {
            Some(f) => f.clone(),
            None => {
                let f = lua
                    .load(body)
                    .set_name("@user_script")
                    .into_function()
                    .map_err(|e| {
                        Fail::Owned(
                            format!("ERR Error compiling script (new function): {}", message(&e))
                                .into_bytes(),
                        )
                    })?;
                if self.functions.len() >= MAX_SCRIPTS {
                    self.functions.clear();
                }
                self.functions.insert(sha.to_owned(), f.clone());
                f
            }
        };
        let list = |items: &[&[u8]]| -> mlua::Result<mlua::Table> {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, v) in items.iter().enumerate() {
                t.raw_set(i + 1, lua.create_string(v)?)?;
            }
            Ok(t)
        };
        let globals = lua.globals();
        globals
            .set("KEYS", list(keys).map_err(lua_fail)?)
            .map_err(lua_fail)?;
        globals
            .set("ARGV", list(argv).map_err(lua_fail)?)
            .map_err(lua_fail)?;
        let redis: mlua::Table = globals.get("redis").map_err(lua_fail)?;
        *self.current.borrow_mut() = Some(ctx.run.clone());
        let ctx = RefCell::new(ctx);
        let result = lua.scope(|scope| {
            let call = |raise: bool| {
                let ctx = &ctx;
                scope.create_function_mut(move |lua, args: MultiValue| {
                    let mut ctx = ctx.borrow_mut();
                    redis_call(lua, &mut ctx, args, raise)
                })
            };
            redis.set("call", call(true)?)?;
            redis.set("pcall", call(false)?)?;
            f.call::<Value>(())
        });
        *self.current.borrow_mut() = None;
        let killed_at = self.killed_at.take();
        if killed_at.is_some() {
            self.watch_for_kill();
        }
        let ctx = ctx.into_inner();
        match result {
            Ok(v) => {
                write_value(w, &v, 0);
                Ok(())
            }
            Err(e) => {
                let (msg, line) = match (killed_at, ctx.failed.take()) {
                    (Some(line), _) => (
                        b"ERR Script killed by user with SCRIPT KILL...".to_vec(),
                        line,
                    ),
                    (None, Some((msg, line))) => (msg, line),
                    (None, None) => {
                        let m = message(&e);
                        let line = error_line(&m);
                        (format!("ERR {m}").into_bytes(), line)
                    }
                };
                let mut reply = msg;
                reply.extend_from_slice(
                    format!(" script: {sha}, on @user_script:{line}.").as_bytes(),
                );
                Err(Fail::Owned(reply))
            }
        }
    }
}

/// The error a script stopped by `SCRIPT KILL` fails with.
fn killed() -> mlua::Error {
    mlua::Error::RuntimeError("Script killed by user with SCRIPT KILL...".into())
}

/// `CONFIG GET`'s scripting settings among `(name, value)` pairs.
pub(super) fn config_get(db: &Db, name: &[u8], pairs: &mut Vec<(&'static str, String)>) {
    for alias in ["busy-reply-threshold", "lua-time-limit"] {
        if name.eq_ignore_ascii_case(alias.as_bytes()) {
            let ms = db.scripts().threshold().as_millis();
            pairs.push((alias, ms.to_string()));
        }
    }
}

/// `CONFIG SET` of a scripting setting; `None`: not one.
pub(super) fn config_set(db: &Db, name: &[u8], value: &[u8]) -> Option<Res> {
    let alias = ["busy-reply-threshold", "lua-time-limit"]
        .into_iter()
        .find(|a| name.eq_ignore_ascii_case(a.as_bytes()))?;
    let failed = |why: String| {
        Err(Fail::Owned(
            format!("ERR CONFIG SET failed (possibly related to argument '{alias}') - {why}")
                .into_bytes(),
        ))
    };
    Some(match parse_i64(value) {
        None => failed("argument couldn't be parsed into an integer".into()),
        Some(ms) => match u64::try_from(ms) {
            Ok(ms) if ms <= MAX_BUSY_REPLY_THRESHOLD_MS => {
                db.scripts().set_threshold_ms(ms);
                Ok(())
            }
            _ => failed(format!(
                "argument must be between 0 and {MAX_BUSY_REPLY_THRESHOLD_MS} inclusive"
            )),
        },
    })
}

/// The text of a Lua error, without mlua's wrapping and traceback.
fn message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => message(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    }
    .lines()
    .next()
    .unwrap_or_default()
    .to_owned()
}

/// The line in "user_script:LINE: ..." (0 when the message has none).
fn error_line(m: &str) -> i64 {
    m.split_once("user_script:")
        .and_then(|(_, rest)| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// `redis.call` (`raise`: an error reply raises a Lua error) or
/// `redis.pcall` (it is returned as a table with `err`).
fn redis_call(
    lua: &Lua,
    ctx: &mut Ctx<'_, '_>,
    args: MultiValue,
    raise: bool,
) -> mlua::Result<Value> {
    let line = lua.inspect_stack(1).map_or(0, |d| i64::from(d.curr_line()));
    // Redis's conversions: strings as they are, numbers as Lua writes them.
    let mut words: Vec<Vec<u8>> = Vec::with_capacity(args.len());
    let mut bad_arg = false;
    for v in args.iter() {
        match v {
            Value::String(s) => words.push(s.as_bytes().to_vec()),
            Value::Integer(_) | Value::Number(_) => match lua.coerce_string(v.clone())? {
                Some(s) => words.push(s.as_bytes().to_vec()),
                None => bad_arg = true,
            },
            _ => bad_arg = true,
        }
    }
    let fail = |ctx: &mut Ctx<'_, '_>, msg: &[u8]| -> mlua::Result<Value> {
        if raise {
            ctx.failed = Some((msg.to_vec(), line));
            return Err(mlua::Error::RuntimeError(
                String::from_utf8_lossy(msg).into_owned(),
            ));
        }
        let t = lua.create_table()?;
        t.set("err", lua.create_string(msg)?)?;
        Ok(Value::Table(t))
    };
    if words.is_empty() {
        return fail(
            ctx,
            b"ERR Please specify at least one argument for this redis lib call",
        );
    }
    if bad_arg {
        return fail(
            ctx,
            b"ERR Lua redis lib command arguments must be strings or integers",
        );
    }
    let name = words[0].to_ascii_lowercase();
    let args: Vec<&[u8]> = words[1..].iter().map(Vec::as_slice).collect();
    let Some(command) = spec(&name) else {
        return fail(ctx, b"ERR Unknown Redis command called from script");
    };
    if !super::arity_fits(&name, words.len()) {
        return fail(
            ctx,
            b"ERR Wrong number of args calling Redis command from script",
        );
    }
    if !allowed_in_scripts(&name) {
        return fail(ctx, NOT_ALLOWED);
    }
    if command.keys(&args).any(|k| !ctx.guard.holds(k)) {
        return fail(
            ctx,
            b"ERR Script attempted to access a key not declared in its KEYS (psp runs a script under the locks of its declared keys)",
        );
    }
    if command.write {
        ctx.run.wrote();
    }
    let mut scratch = std::mem::take(&mut ctx.scratch);
    scratch.clear();
    let mut w = Reply {
        out: &mut scratch,
        resp3: false,
    };
    let r = super::run(
        super::spec_index(&name),
        &name,
        &words[0],
        &args,
        ctx.db,
        ctx.session,
        &mut w,
        Some(&mut *ctx.guard),
        &mut || {},
    );
    if let Err(f) = r {
        w.out.clear();
        super::write_fail(&mut w, f);
    }
    let value = if scratch.first() == Some(&b'-') {
        let end = scratch.len().saturating_sub(2);
        let msg = scratch[1..end].to_vec();
        ctx.scratch = scratch;
        return fail(ctx, &msg);
    } else {
        let mut at = 0;
        read_reply(lua, &scratch, &mut at)
    };
    ctx.scratch = scratch;
    value
}

/// Commands a script may call: not those that manage the connection or a
/// transaction (Redis refuses them too), nor those that walk the keyspace
/// or reach a key the table does not place (MEMORY USAGE): the script holds
/// only its declared keys' shards.
fn allowed_in_scripts(name: &[u8]) -> bool {
    !matches!(
        name,
        b"eval"
            | b"evalsha"
            | b"script"
            | b"multi"
            | b"exec"
            | b"discard"
            | b"watch"
            | b"unwatch"
            | b"quit"
            | b"reset"
            | b"hello"
            | b"auth"
            | b"client"
            | b"subscribe"
            | b"unsubscribe"
            | b"psubscribe"
            | b"punsubscribe"
            | b"command"
            | b"config"
            | b"info"
            | b"keys"
            | b"scan"
            | b"randomkey"
            | b"dbsize"
            | b"flushdb"
            | b"flushall"
            | b"memory"
    )
}

/// A RESP2 reply at `at` in `b` as Redis hands it to Lua: integers as
/// numbers, bulk strings as strings, a nil as false, arrays as tables, a
/// status as `{ok = ...}` (an error never reaches here).
fn read_reply(lua: &Lua, b: &[u8], at: &mut usize) -> mlua::Result<Value> {
    let bad = || mlua::Error::RuntimeError("malformed reply".into());
    let kind = *b.get(*at).ok_or_else(bad)?;
    let nl = b[*at..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or_else(bad)?
        + *at;
    let line = &b[*at + 1..nl];
    *at = nl + 2;
    let num = || parse_i64(line).ok_or_else(bad);
    match kind {
        b'+' => {
            let t = lua.create_table()?;
            t.set("ok", lua.create_string(line)?)?;
            Ok(Value::Table(t))
        }
        b':' => Ok(Value::Number(num()? as f64)),
        b'$' => {
            let n = num()?;
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let n = n as usize;
            let s = b.get(*at..*at + n).ok_or_else(bad)?;
            *at += n + 2;
            Ok(Value::String(lua.create_string(s)?))
        }
        b'*' => {
            let n = num()?;
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let t = lua.create_table()?;
            for i in 0..n {
                t.raw_set(i + 1, read_reply(lua, b, at)?)?;
            }
            Ok(Value::Table(t))
        }
        _ => Err(bad()),
    }
}

/// A script's result as Redis replies it: a number as an integer
/// (truncated), a string as a bulk string, true as 1, false and nil as a
/// nil, a table with `err` as an error, with `ok` as a status, else as an
/// array of its elements up to the first nil.
fn write_value(w: &mut Reply<'_>, v: &Value, depth: usize) {
    match v {
        Value::Boolean(true) => w.int(1),
        Value::Integer(i) => w.int(*i),
        Value::Number(n) => w.int(*n as i64),
        Value::String(s) => w.bulk(&s.as_bytes()),
        Value::Table(t) if depth < MAX_DEPTH => {
            if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
                return w.error(&e.as_bytes());
            }
            if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
                return w.simple(&s.as_bytes());
            }
            let items: Vec<Value> = (1..)
                .map_while(|i| match t.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => None,
                    Ok(v) => Some(v),
                })
                .collect();
            w.array(items.len());
            for item in &items {
                write_value(w, item, depth + 1);
            }
        }
        _ => w.nil(),
    }
}
