//! The HTTP/1.1 server behind `psp serve --metrics`: `hyper` on a
//! current-thread `tokio` runtime that owns one thread of its own, serving
//! one page (`GET`/`HEAD` of one path) whose body a callback writes on each
//! request.
//!
//! It knows nothing of metrics (the exporter's callback encodes them) and
//! must never reach the dispatcher: it runs on its own thread, and all the
//! callback reads is the latest published snapshot.
//!
//! What a client can cost is bounded, so that no client can exhaust the
//! server's memory or starve a scrape:
//! - a request's head (request line and headers) may hold at most
//!   [`MAX_HEAD_BYTES`] (hyper's read buffer: 431 past it, and nothing more is
//!   read), and must arrive within [`CLIENT_DEADLINE`] of the connection's
//!   opening or of the previous answer (so an idle keep-alive connection is
//!   closed after that long too);
//! - request bodies are never read: hyper discards what its read buffer
//!   already holds and closes a connection whose body goes on;
//! - an answer that makes no progress for [`WRITE_STALL`] (a client that does
//!   not read) ends its connection;
//! - at most [`MAX_CONNECTIONS`] connections are open at once (fewer where
//!   the process may open few descriptors); past that a new one is answered
//!   503 and closed at once, never queued.
//!
//! Keep-alive and pipelining are hyper's: requests on one connection are
//! answered one after the other, in their order.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

/// Most bytes of a request's head (request line and headers, up to the blank
/// line): a scrape's is a few hundred. It is hyper's read buffer (whose
/// least is 8 KiB): past it the answer is 431 (Request Header Fields Too
/// Large) and the connection closes.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;
/// How long a client may take to send a request's head, counted from the
/// connection's opening or from the previous answer.
pub const CLIENT_DEADLINE: Duration = Duration::from_secs(2);
/// How long writing an answer may make no progress before the connection is
/// closed (its client does not read).
pub const WRITE_STALL: Duration = Duration::from_secs(10);
/// Connections open at once; a new one past this is answered 503 and closed.
/// Each costs at most a few tens of KiB (read and write buffers, one answer).
pub const MAX_CONNECTIONS: usize = 1024;
/// Connections the kernel queues before they are accepted.
const LISTEN_BACKLOG: i32 = 1024;
/// How long dropping a server waits for its thread.
const EXIT_GRACE: Duration = Duration::from_millis(500);
/// Written to a connection past [`MAX_CONNECTIONS`] before it is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 23\r\nConnection: close\r\n\r\nbusy: too many clients\n";

/// What the server serves: `GET` or `HEAD` of `path`, whose body `body`
/// writes on each request, as `content_type`.
pub(crate) struct Page {
    /// The one path served (any query string is ignored).
    pub path: &'static str,
    /// The body's content type.
    pub content_type: &'static str,
    /// Writes the body (called on the server's thread, one request at a time).
    pub body: Box<dyn FnMut() -> String + Send>,
}

/// Binds a listener (port 0: any free port) with room for a burst of
/// connections, so that a bad or used address is an error before anything
/// starts.
pub(crate) fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // As std's `TcpListener::bind`: a restarted server rebinds its port at once.
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// A running server: stops (and closes every connection) when dropped.
pub(crate) struct HttpServer {
    addr: SocketAddr,
    /// Dropping it stops the server.
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// Serves `page` on `listener` from a thread named `thread_name`, with at
    /// most `max_connections` open at once ([`MAX_CONNECTIONS`] but in tests;
    /// fewer where the process may open few descriptors: see
    /// [`descriptor_budget`]).
    ///
    /// # Errors
    /// The runtime, the listener's registration or the thread cannot be made.
    pub(crate) fn start(
        listener: TcpListener,
        thread_name: &str,
        page: Page,
        max_connections: usize,
    ) -> io::Result<HttpServer> {
        let addr = listener.local_addr()?;
        let max_connections = max_connections.min(descriptor_budget());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        listener.set_nonblocking(true)?;
        let listener = {
            let _in_runtime = runtime.enter();
            tokio::net::TcpListener::from_std(listener)?
        };
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name(thread_name.into())
            .spawn(move || {
                let page = Arc::new(Mutex::new(page));
                runtime.block_on(serve(listener, page, max_connections, stopped));
                // Dropping the runtime drops every connection's task: each
                // closes its socket.
                drop(runtime);
            })?;
        Ok(HttpServer {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        // The accept loop ends as the sender goes; the thread then drops its
        // runtime and with it every connection.
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let end = Instant::now() + EXIT_GRACE;
            while !t.is_finished() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(1));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

/// A quarter of the descriptors the process may open: the most connections
/// the server keeps, so that it reaches its own cap (and answers 503) before
/// `accept` fails for want of descriptors (which would leave new clients
/// waiting in the kernel's queue), and leaves the rest to the front end.
fn descriptor_budget() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for the call to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return MAX_CONNECTIONS;
    }
    usize::try_from(lim.rlim_cur / 4)
        .unwrap_or(usize::MAX)
        .max(16)
}

/// Accepts connections until `stopped`, each served by a task of its own
/// (at most `max_connections` at once).
async fn serve(
    listener: tokio::net::TcpListener,
    page: Arc<Mutex<Page>>,
    max_connections: usize,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(CLIENT_DEADLINE)
        .max_buf_size(MAX_HEAD_BYTES)
        .keep_alive(true)
        // A client may stop sending once it asked (`curl`-like tools, and
        // probes) and still read its answer.
        .half_close(true);
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        let accepted = std::future::poll_fn(|cx| {
            if Pin::new(&mut stopped).poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            listener.poll_accept(cx).map(Some)
        })
        .await;
        let stream = match accepted {
            None => return,
            Some(Ok((stream, _))) => stream,
            // A failed accept (e.g. out of descriptors) must not end the
            // server while `psp serve` runs; nor may it spin.
            Some(Err(_)) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if open.load(Ordering::Relaxed) >= max_connections {
            // Never queued: the client learns at once (a full socket buffer
            // just loses the answer), and the socket closes here.
            let _ = stream.try_write(BUSY);
            continue;
        }
        // Answers go out as they are written (pipelined ones one by one).
        let _ = stream.set_nodelay(true);
        let held = OpenConnection::new(&open);
        let page = page.clone();
        let service = service_fn(move |req: Request<Incoming>| {
            let resp = answer(&req, &page);
            async move { Ok::<_, Infallible>(resp) }
        });
        let conn = http.serve_connection(TokioIo::new(WriteStall::new(stream)), service);
        tokio::spawn(async move {
            // Errors (a timeout, a malformed request, a reset) end only
            // this connection; hyper answered what it could.
            let _ = conn.await;
            drop(held);
        });
    }
}

/// The answer to one request.
fn answer(req: &Request<Incoming>, page: &Mutex<Page>) -> Response<Full<Bytes>> {
    let mut page = page.lock().unwrap_or_else(|p| p.into_inner());
    if req.uri().path() != page.path {
        let body = format!("not found: the page is at {}\n", page.path);
        return plain(StatusCode::NOT_FOUND, body);
    }
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        let mut resp = plain(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("only GET {}\n", page.path),
        );
        resp.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return resp;
    }
    // hyper leaves the body out of a HEAD answer (its length stays).
    let body = (page.body)();
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(page.content_type));
    resp
}

/// A plain-text answer.
fn plain(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// One open connection, counted while it lives.
struct OpenConnection(Arc<AtomicUsize>);

impl OpenConnection {
    fn new(open: &Arc<AtomicUsize>) -> Self {
        open.fetch_add(1, Ordering::Relaxed);
        OpenConnection(open.clone())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A stream whose writes fail once they made no progress for
/// [`WRITE_STALL`] (hyper has no write timeout of its own).
struct WriteStall<S> {
    io: S,
    /// Since when writing waits, if it does.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteStall<S> {
    fn new(io: S) -> Self {
        WriteStall { io, stalled: None }
    }

    /// `r`, or an error in its place once writing waited too long.
    fn watch<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let stall = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(WRITE_STALL)));
        match stall.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::ErrorKind::TimedOut.into())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteStall<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteStall<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.watch(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.watch(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        self.watch(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_shutdown(cx);
        self.watch(cx, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn server(max_connections: usize) -> HttpServer {
        let page = Page {
            path: "/page",
            content_type: "text/plain",
            body: Box::new(|| "hello\n".into()),
        };
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        HttpServer::start(listener, "http-test", page, max_connections).unwrap()
    }

    fn connect(addr: SocketAddr) -> TcpStream {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// Asks for the page on `s` and returns the answer's first bytes (all of
    /// a short answer).
    fn ask(s: &mut TcpStream) -> String {
        s.write_all(b"GET /page HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    /// Past the cap a connection is answered 503 at once; once one closes,
    /// a new one is served again.
    #[test]
    fn connections_past_the_cap_are_refused_at_once() {
        let srv = server(2);
        let mut a = connect(srv.local_addr());
        let mut b = connect(srv.local_addr());
        // Both are open (and served) before the third comes.
        assert!(ask(&mut a).starts_with("HTTP/1.1 200 "));
        assert!(ask(&mut b).starts_with("HTTP/1.1 200 "));
        let mut c = connect(srv.local_addr());
        let mut refused = String::new();
        let _ = c.read_to_string(&mut refused);
        assert!(refused.starts_with("HTTP/1.1 503 "), "{refused:?}");
        drop(a);
        // The server sees the close when it next reads: within a deadline.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut d = connect(srv.local_addr());
            if ask(&mut d).starts_with("HTTP/1.1 200 ") {
                break;
            }
            assert!(Instant::now() < deadline, "the cap never freed a place");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(ask(&mut b).starts_with("HTTP/1.1 200 "));
    }

    /// A client that stops reading loses its connection once writing made
    /// no progress for `WRITE_STALL` (here paused time: no waiting).
    #[test]
    fn a_write_that_makes_no_progress_times_out() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            // A duplex pipe of 64 bytes whose far end never reads.
            let (near, _far) = tokio::io::duplex(64);
            let mut w = WriteStall::new(near);
            let wrote = tokio::io::AsyncWriteExt::write_all(&mut w, &[7u8; 4096]).await;
            assert_eq!(wrote.unwrap_err().kind(), io::ErrorKind::TimedOut);
        });
    }
}
