//! Commands against recorded references: each `data/redis7-*.jsonl` holds
//! a case file's commands and redis-server 7.0.15's reply to each, recorded
//! in order on one connection (`scripts/redis-transcript.py record
//! data/NAME.cases.json PORT`). Replayed in order on one session of a fresh
//! store, every reply must be the same bytes.

use psp_proto::commands::{Session, execute};
use psp_proto::db::Db;
use psp_proto::resp::write_command;

/// Runs the command of `args` on `session`; its reply as text.
fn run_words(db: &Db, session: &mut Session, args: &[&str]) -> String {
    let words: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let mut req = Vec::new();
    write_command(&words, &mut req);
    let mut out = Vec::new();
    execute(&req, db, session, &mut out, &mut || {}).expect("one request");
    String::from_utf8_lossy(&out).into_owned()
}

/// Replays `transcript`; returns how many commands it checked.
fn replay(name: &str, transcript: &str) -> usize {
    let db = Db::default();
    let mut session = Session::default();
    let mut checked = 0;
    for line in transcript.lines().filter(|l| !l.trim().is_empty()) {
        let (args, want): (Vec<String>, String) =
            serde_json::from_str(line).expect("a transcript line");
        let words: Vec<&[u8]> = args.iter().map(String::as_bytes).collect();
        let mut req = Vec::new();
        write_command(&words, &mut req);
        let mut out = Vec::new();
        execute(&req, &db, &mut session, &mut out, &mut || {}).expect("one request");
        // HELLO switches the protocol; its reply names the server's version
        // and the connection's id, which differ by nature.
        if args[0].eq_ignore_ascii_case("hello") {
            continue;
        }
        // The transcript holds the replies as Latin-1 text (bytes as chars).
        let want: Vec<u8> = want.chars().map(|c| c as u32 as u8).collect();
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&want),
            "{name}: {args:?}"
        );
        checked += 1;
    }
    checked
}

#[test]
fn scripts_answer_byte_for_byte_as_redis_7() {
    let n = replay("scripting", include_str!("data/redis7-scripting.jsonl"));
    assert!(n > 40, "{n} lines");
}

#[test]
fn sorted_set_ranges_and_removals_answer_byte_for_byte_as_redis_7() {
    let n = replay("commands", include_str!("data/redis7-commands.jsonl"));
    assert!(n > 30, "{n} lines");
    let n = replay(
        "zremrangebylex",
        include_str!("data/redis7-zremrangebylex.jsonl"),
    );
    assert!(n > 15, "{n} lines");
}

#[test]
fn cjson_in_scripts_answers_byte_for_byte_as_redis_7() {
    // Encoding (numbers as %.14g, `/` escaped, sparse arrays, errors) and
    // decoding (null as cjson.null); a malformed document's error wording
    // differs (not recorded).
    let n = replay("cjson", include_str!("data/redis7-cjson.jsonl"));
    assert!(n > 20, "{n} lines");
}

#[test]
fn the_bit_library_in_scripts_answers_byte_for_byte_as_redis_7() {
    let n = replay("bit", include_str!("data/redis7-bit.jsonl"));
    assert!(n > 25, "{n} lines");
}

#[test]
fn streams_answer_byte_for_byte_as_redis_7() {
    // XADD with ids given (an id from the clock differs by run), ranges,
    // deletions, exact and approximate trims (whole nodes of 100).
    let n = replay("streams", include_str!("data/redis7-streams.jsonl"));
    assert!(n > 300, "{n} lines");
    // XREAD without blocking (and BLOCK inside MULTI: a null at once).
    let n = replay("xread", include_str!("data/redis7-xread.jsonl"));
    assert!(n > 20, "{n} lines");
}

/// A script may reach only the keys it declares: it runs under their
/// shards' locks alone (a documented difference: redis-server lets a
/// standalone server's script reach any key).
#[test]
fn a_script_reaching_an_undeclared_key_is_refused_and_changes_nothing() {
    let db = Db::default();
    let mut session = Session::default();
    let mut run = |args: &[&str]| run_words(&db, &mut session, args);
    // Keys spread over shards: at least one is not the declared key's.
    let reply = (0..64)
        .map(|i| {
            run(&[
                "EVAL",
                "redis.call('set', KEYS[1], 'x'); return redis.call('set', ARGV[1], 'y')",
                "1",
                "declared",
                &format!("other{i}"),
            ])
        })
        .find(|r| r.starts_with('-'))
        .expect("some key of another shard");
    assert!(reply.contains("not declared in its KEYS"), "{reply}");
    assert!(reply.contains("on @user_script:1."), "{reply}");
}

/// A script's memory is bounded: one that grows without end gets Lua's
/// error reply, and the next script runs.
#[test]
fn a_script_past_its_memory_bound_is_an_error_and_the_next_runs() {
    let db = Db::default();
    let mut session = Session::default();
    let mut run = |args: &[&str]| run_words(&db, &mut session, args);
    let reply = run(&[
        "EVAL",
        "local t = {} for i = 1, 1000 do t[i] = string.rep('x', 1000000) .. i end return #t",
        "0",
    ]);
    assert!(
        reply.starts_with("-ERR") && reply.contains("memory"),
        "{reply}"
    );
    assert_eq!(run(&["EVAL", "return 1", "0"]), ":1\r\n");
}

/// Replays a memcached transcript (`data/memcached16-*.jsonl`, recorded
/// from memcached 1.6.18 by `scripts/memcached-transcript.py record`): each
/// case's bytes framed as the TCP front end frames them, every request run
/// on one fresh store, the replies of the case compared with memcached's
/// bytes. Returns how many cases it checked.
fn replay_memcached(name: &str, transcript: &str) -> usize {
    let db = Db::default();
    let mut checked = 0;
    for line in transcript.lines().filter(|l| !l.trim().is_empty()) {
        let (case, want): (String, String) = serde_json::from_str(line).expect("a transcript line");
        let latin1 = |s: &str| -> Vec<u8> { s.chars().map(|c| c as u32 as u8).collect() };
        let bytes = latin1(&case);
        let mut at = 0;
        let mut out = Vec::new();
        while at < bytes.len() {
            let n = psp_proto::memcache::request_len(&bytes[at..], 65_535)
                .expect("framed")
                .expect("complete");
            psp_proto::memcache::execute_db(&bytes[at..at + n], &db, &mut out)
                .expect("one request");
            at += n;
        }
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&latin1(&want)),
            "{name}: {case:?}"
        );
        checked += 1;
    }
    checked
}

/// Stale-while-revalidate (`mg`'s `N`, `R`; `md`/`ms` with `I`; the `W`,
/// `X`, `Z` marks), `h` and `u`, and `me`, as memcached 1.6.18 answers
/// them.
#[test]
fn memcached_stale_while_revalidate_and_me_answer_byte_for_byte_as_memcached_1_6() {
    let n = replay_memcached("swr", include_str!("data/memcached16-swr.jsonl"));
    assert!(n > 90, "{n} cases");
}

/// INCRBYFLOAT and HINCRBYFLOAT in Redis's long double: seeded sums of
/// integers, decimals, exponents, 64-bit-sized values, hex floats and
/// values past the range, and the errors, as redis-server 7.0.15 answers.
#[test]
fn incrbyfloat_answers_byte_for_byte_as_redis_7_long_double() {
    let n = replay("incrbyfloat", include_str!("data/redis7-incrbyfloat.jsonl"));
    assert!(n > 200, "{n} commands");
}

/// ZUNION, ZINTER, ZDIFF, their STORE forms, ZINTERCARD and ZMSCORE:
/// seeded commands over sorted sets, a set and missing keys, with WEIGHTS
/// (infinities included), AGGREGATE, WITHSCORES in RESP2 and RESP3, and
/// the errors, as redis-server 7.0.15 answers.
#[test]
fn sorted_set_operations_answer_byte_for_byte_as_redis_7() {
    let n = replay("zsetops", include_str!("data/redis7-zsetops.jsonl"));
    assert!(n > 200, "{n} commands");
}

/// SUBSTR, LPUSHX, RPUSHX, HSTRLEN, SINTERCARD, COPY and OBJECT
/// (ENCODING at Redis 7.0's default thresholds, REFCOUNT of shared
/// integers, IDLETIME, FREQ, HELP), with their errors, as redis-server
/// 7.0.15 answers.
#[test]
fn more_commands_answer_byte_for_byte_as_redis_7() {
    let n = replay(
        "morecommands",
        include_str!("data/redis7-morecommands.jsonl"),
    );
    assert!(n > 120, "{n} commands");
}

/// SETBIT, GETBIT, BITCOUNT and BITPOS (BYTE and BIT ranges, negative
/// and out-of-range bounds), BITOP, and their errors: seeded commands as
/// redis-server 7.0.15 answers.
#[test]
fn bitmaps_answer_byte_for_byte_as_redis_7() {
    let n = replay("bitmaps", include_str!("data/redis7-bitmaps.jsonl"));
    assert!(n > 200, "{n} commands");
}

/// BITFIELD and BITFIELD_RO: GET, SET and INCRBY of signed and unsigned
/// fields at bit and `#N` offsets, OVERFLOW WRAP, SAT and FAIL, the string
/// grown for the farthest write, and every argument error in Redis's
/// order: seeded commands as redis-server 7.0.15 answers.
#[test]
fn bitfield_answers_byte_for_byte_as_redis_7() {
    let n = replay("bitfield", include_str!("data/redis7-bitfield.jsonl"));
    assert!(n > 300, "{n} commands");
}

/// LMPOP, ZMPOP, and BLMPOP and BZMPOP where something is there (or inside
/// MULTI, where they do not block), with their errors, in RESP2 and RESP3,
/// as redis-server 7.0.15 answers.
#[test]
fn multi_key_pops_answer_byte_for_byte_as_redis_7() {
    let n = replay("mpop", include_str!("data/redis7-mpop.jsonl"));
    assert!(n > 50, "{n} commands");
}

/// ZRANGESTORE by rank, score and lex, REV and LIMIT, onto itself, from a
/// missing key and a string, as redis-server 7.0.15 answers.
#[test]
fn zrangestore_answers_byte_for_byte_as_redis_7() {
    let n = replay("zrangestore", include_str!("data/redis7-zrangestore.jsonl"));
    assert!(n > 20, "{n} commands");
}

/// SORT and SORT_RO over lists, sets and sorted sets: numeric and ALPHA,
/// DESC, LIMIT, BY (keys, hash fields, nosort), GET (`#`, keys, fields),
/// STORE, and the errors, as redis-server 7.0.15 answers.
#[test]
fn sort_answers_byte_for_byte_as_redis_7() {
    let n = replay("sort", include_str!("data/redis7-sort.jsonl"));
    assert!(n > 60, "{n} commands");
}

/// HRANDFIELD and ZRANDMEMBER (and SRANDMEMBER) where the pick is decided
/// (one element; counts past the size; repetitions), their WITHVALUES and
/// WITHSCORES forms in RESP2 and RESP3, and their errors, as redis-server
/// 7.0.15 answers.
#[test]
fn random_picks_answer_byte_for_byte_as_redis_7() {
    let n = replay("random", include_str!("data/redis7-random.jsonl"));
    assert!(n > 30, "{n} commands");
}

/// LCS with LEN, IDX, MINMATCHLEN and WITHMATCHLEN over seeded strings,
/// and its errors, as redis-server 7.0.15 answers.
#[test]
fn lcs_answers_byte_for_byte_as_redis_7() {
    let n = replay("lcs", include_str!("data/redis7-lcs.jsonl"));
    assert!(n > 60, "{n} commands");
}

#[test]
fn memcached_meta_commands_answer_byte_for_byte_as_memcached_1_6() {
    let n = replay_memcached("meta", include_str!("data/memcached16-meta.jsonl"));
    assert!(n > 80, "{n} cases");
}
