//! What the front ends count: every datagram or request read ends in one
//! counter, and a live snapshot carries them to the metrics exporter. The
//! counters are plain numbers: the front ends add to them, nothing here
//! decides.

/// What the network front end counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetCounters {
    /// Datagrams received.
    pub received: u64,
    /// Datagrams shorter than a header: dropped without a reply.
    pub truncated: u64,
    /// Answered BAD_REQUEST.
    pub bad_request: u64,
    /// Answered UNKNOWN_TYPE.
    pub unknown_type: u64,
    /// Answered OVERLOADED.
    pub overloaded: u64,
    /// memcached's protocol: requests refused because as many requests as
    /// the bound allows waited behind their peers' executing ones (each also
    /// in `overloaded`, or in `shed_unanswered` past the reply budget).
    pub held_full: u64,
    /// Shed without a reply: OVERLOADED replies are budgeted to the number of
    /// requests served plus a burst, so that refusing never costs more than
    /// serving.
    pub shed_unanswered: u64,
    /// Error replies the OS refused to send, and answers worker 0 held on
    /// the dispatcher's thread that the OS refused at the pass's flush.
    /// The latter's requests are also counted as answered in their type
    /// (the completion left before the flush): the one case where a
    /// request is in two counters; `sendmmsg` with `MSG_DONTWAIT` refuses
    /// only at a full socket buffer.
    pub reply_send_errors: u64,
    /// Receive calls that failed (other than "nothing to receive").
    pub receive_errors: u64,
    /// Link-layer frames dropped as malformed (AF_XDP: truncated headers,
    /// bad lengths or checksums, fragments; the kernel drops these itself
    /// on the UDP path).
    pub malformed_frames: u64,
    /// Datagrams the OS dropped before the server read them (socket receive
    /// buffer full), when the datapath can tell.
    pub dropped_by_os: Option<u64>,
    /// The AF_XDP datapath's frame accounting and drops, on that datapath.
    pub xdp: Option<crate::xdp::XdpReport>,
    /// The TCP front end's connection counters, on that front end.
    pub tcp: Option<crate::tcp::TcpCounters>,
    /// System calls of the network path, counted at each call: the
    /// network thread's receives, sends, waits and accepts, the workers'
    /// sends and their wake-ups of the network thread (not the runtime's
    /// parks and wake-ups of idle workers); `None` where not counted
    /// (AF_XDP).
    pub syscalls: Option<u64>,
}

impl NetCounters {
    /// Counters the network front end puts in a live snapshot (all but
    /// `dropped_by_os`, which the exporter reads itself: it is a file read,
    /// and `held_full`, which is in the final report only).
    pub const SNAPSHOT_LEN: usize = 10;

    /// Writes the live-snapshot values into `out`, with `malformed`: the
    /// datapath's count of malformed frames so far.
    pub(crate) fn fill_snapshot(&self, out: &mut [u64], malformed: u64) {
        let mut values = self.snapshot_values();
        values[8] = malformed;
        for (o, v) in out.iter_mut().zip(values) {
            *o = v;
        }
    }

    fn snapshot_values(&self) -> [u64; Self::SNAPSHOT_LEN] {
        [
            self.received,
            self.truncated,
            self.bad_request,
            self.unknown_type,
            self.overloaded,
            self.shed_unanswered,
            self.reply_send_errors,
            self.receive_errors,
            self.malformed_frames,
            // 0: not counted; else the count plus one.
            self.syscalls.map_or(0, |n| n + 1),
        ]
    }

    /// The counters from a snapshot's front-end part (missing values read 0;
    /// `dropped_by_os` is `None`).
    pub fn from_snapshot(front: &[u64]) -> NetCounters {
        let v = |i: usize| front.get(i).copied().unwrap_or(0);
        NetCounters {
            received: v(0),
            truncated: v(1),
            bad_request: v(2),
            unknown_type: v(3),
            overloaded: v(4),
            held_full: 0,
            shed_unanswered: v(5),
            reply_send_errors: v(6),
            receive_errors: v(7),
            malformed_frames: v(8),
            dropped_by_os: None,
            xdp: None,
            tcp: None,
            syscalls: v(9).checked_sub(1),
        }
    }
}

/// A datapath's end-of-run report ([`crate::datapath::Datapath::Report`]),
/// filed with the front end's counters.
pub trait DatapathReport {
    /// Puts the report where it belongs in `net`.
    fn file(self, net: &mut NetCounters);
}

impl DatapathReport for () {
    fn file(self, _: &mut NetCounters) {}
}

impl DatapathReport for crate::xdp::XdpReport {
    fn file(self, net: &mut NetCounters) {
        net.xdp = Some(self);
    }
}
