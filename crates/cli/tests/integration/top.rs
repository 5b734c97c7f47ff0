//! `psp top` as a user runs it: against a live `psp serve --metrics`, in a
//! pseudo-terminal (its screen read back by a terminal emulator), quitting on
//! `q`; and a dead or wrong address as a one-line error, exit code 2, before
//! the screen is taken over.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::assert_one_line_error;
use portable_pty::{CommandBuilder, PtySize, native_pty_system};

/// A server that answers every connection with `answer` and closes.
fn answering(answer: &'static str) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(answer.as_bytes());
        }
    });
    addr
}

#[test]
fn a_dead_or_wrong_address_is_a_one_line_error() {
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    assert_one_line_error(&["top", &dead], "cannot fetch");
    assert_one_line_error(&["top", &format!("http://{dead}/metrics")], &dead);
    assert_one_line_error(&["top", "nowhere"], "not HOST:PORT");
    assert_one_line_error(&["top", &dead, "--interval", "10ms"], "--interval");
    let not_http = answering("hello\n");
    assert_one_line_error(&["top", &not_http], "cannot fetch");
    let not_psp =
        answering("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nup 1\n");
    assert_one_line_error(&["top", &not_psp], "not the /metrics of a psp serve");
    // A psp server's metrics, but no terminal to draw on (the output is a
    // pipe): said in one line, with what to do instead.
    let psp = answering(
        "HTTP/1.1 200 OK\r\nContent-Length: 36\r\nConnection: close\r\n\r\npsp_snapshots_total 1\npsp_workers 2\n",
    );
    assert_one_line_error(&["top", &psp], "needs a terminal");
}

/// Kills a child when dropped (a failed assertion must not leave it behind).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn top_shows_a_live_server_and_quits_on_q() {
    let server = Command::new(env!("CARGO_BIN_EXE_psp"))
        .args(["serve", "--address", "127.0.0.1:0", "--duration", "60s"])
        .args(["--workload", "extreme-bimodal-x1000", "--workers", "2"])
        .args(["--policy", "darc", "--idle", "park"])
        .args(["--metrics", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start psp serve");
    let mut server = Reaped(server);
    let first = BufReader::new(server.0.stdout.take().unwrap())
        .lines()
        .next()
        .expect("a listening line")
        .unwrap();
    let metrics = common::metrics_address(&first);

    let (rows, cols) = (30, 110);
    let pair = native_pty_system()
        .openpty(PtySize {
            rows,
            cols,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("a pseudo-terminal");
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_psp"));
    cmd.args(["top", &metrics, "--interval", "200ms"]);
    cmd.env("TERM", "xterm-256color");
    let mut top = pair.slave.spawn_command(cmd).expect("start psp top");
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader().unwrap();
    let mut writer = pair.master.take_writer().unwrap();
    let screen = Arc::new(Mutex::new(vt100::Parser::new(rows, cols, 0)));
    std::thread::spawn({
        let screen = screen.clone();
        move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                screen.lock().unwrap().process(&buf[..n]);
            }
        }
    });

    let contents = || screen.lock().unwrap().screen().contents();
    let deadline = Instant::now() + Duration::from_secs(30);
    let shown = loop {
        let text = contents();
        let ready = ["short", "long", "w0", "w1", "req/s", "events"]
            .iter()
            .all(|n| text.contains(n));
        if ready {
            break text;
        }
        if let Some(status) = top.try_wait().unwrap() {
            panic!("psp top ended ({status:?}) before showing the server:\n{text}");
        }
        assert!(Instant::now() < deadline, "psp top never showed:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let w0 = shown
        .lines()
        .find(|l| l.contains("w0"))
        .expect("a worker row");
    assert!(
        w0.contains("idle") || w0.contains("short") || w0.contains("long"),
        "{shown}"
    );

    writer.write_all(b"q").unwrap();
    writer.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = top.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = top.kill();
            panic!("psp top did not quit on q:\n{}", contents());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "psp top exited {status:?}");
}
