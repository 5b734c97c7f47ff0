//! The wire protocol, version 1 (docs/protocol.md): one request or response per
//! UDP datagram, a 16-byte little-endian header, then the body.
//!
//! ```text
//! offset size field
//!      0    1 version       1
//!      1    1 code          requests: 0; responses: a Status
//!      2    2 type          request type (the classifier reads it here)
//!      4    2 body length   bytes after the header; must match the datagram
//!      6    2 reserved      senders write 0, receivers ignore it
//!      8    8 request id    chosen by the client, echoed in the response
//! ```
//!
//! A request datagram is at most [`MAX_REQUEST_LEN`] bytes, header included; a
//! longer one is malformed whatever its body length field says.
//!
//! Parsing never panics and never reads past the datagram: every malformed input
//! maps to a [`ParseError`].

/// The protocol version this build speaks.
pub const VERSION: u8 = 1;
/// Header bytes.
pub const HEADER_LEN: usize = 16;
/// Offset of the type field (where a header classifier reads).
pub const TYPE_OFFSET: usize = 2;
/// The `code` of a request.
pub const CODE_REQUEST: u8 = 0;
/// Largest body a UDP/IPv4 datagram can carry after the header (the bound on
/// a response's body).
pub const MAX_BODY: usize = 65_507 - HEADER_LEN;
/// Longest request datagram, header included: what a server's receive buffer
/// must hold. Anything longer is a [`ParseError::TooLong`] (BAD_REQUEST).
pub const MAX_REQUEST_LEN: usize = 2048;
/// Largest request body.
pub const MAX_REQUEST_BODY: usize = MAX_REQUEST_LEN - HEADER_LEN;

/// A response's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Status {
    /// Served; the body is the application's response.
    Ok = 1,
    /// Shed at a full queue (or no free request slot): try later.
    Overloaded = 2,
    /// The datagram is not a valid version-1 request.
    BadRequest = 3,
    /// The request type is not registered on this server.
    UnknownType = 4,
    /// The application failed to serve the request.
    HandlerError = 5,
}

impl Status {
    /// Every status, in code order.
    pub const ALL: [Status; 5] = [
        Status::Ok,
        Status::Overloaded,
        Status::BadRequest,
        Status::UnknownType,
        Status::HandlerError,
    ];

    /// The status of a response code.
    pub fn from_code(code: u8) -> Option<Status> {
        Self::ALL.into_iter().find(|s| *s as u8 == code)
    }

    /// The protocol's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Overloaded => "OVERLOADED",
            Status::BadRequest => "BAD_REQUEST",
            Status::UnknownType => "UNKNOWN_TYPE",
            Status::HandlerError => "HANDLER_ERROR",
        }
    }
}

/// A decoded header (request or response).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// `code` byte: 0 for a request, a [`Status`] for a response.
    pub code: u8,
    /// Request type.
    pub type_id: u16,
    /// Body length.
    pub body_len: u16,
    /// Request id.
    pub id: u64,
}

/// Why a datagram is not a valid message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Shorter than a header: nothing in it can be trusted, not even an id.
    #[error("datagram of {0} bytes is shorter than the 16-byte header")]
    Truncated(usize),
    /// A version this build does not speak.
    #[error("unsupported protocol version {0}")]
    Version(u8),
    /// A request was expected and the code is not 0 (or a response was expected
    /// and the code is not a status).
    #[error("unexpected code {0}")]
    Code(u8),
    /// A request datagram longer than [`MAX_REQUEST_LEN`] (it may have been cut
    /// to a receive buffer's size: the rest of it is not there to be read).
    #[error(
        "request datagram of at least {0} bytes is longer than the protocol's {MAX_REQUEST_LEN}"
    )]
    TooLong(usize),
    /// The body length field disagrees with the datagram.
    #[error("body length field says {declared} bytes, the datagram carries {actual}")]
    Length {
        /// The header's body length.
        declared: usize,
        /// Bytes after the header.
        actual: usize,
    },
}

#[inline]
fn decode(dgram: &[u8]) -> Result<Header, ParseError> {
    let Some(h) = dgram.first_chunk::<HEADER_LEN>() else {
        return Err(ParseError::Truncated(dgram.len()));
    };
    if h[0] != VERSION {
        return Err(ParseError::Version(h[0]));
    }
    let body_len = u16::from_le_bytes([h[4], h[5]]);
    let actual = dgram.len() - HEADER_LEN;
    if usize::from(body_len) != actual {
        return Err(ParseError::Length {
            declared: body_len.into(),
            actual,
        });
    }
    Ok(Header {
        code: h[1],
        type_id: u16::from_le_bytes([h[2], h[3]]),
        body_len,
        id: u64::from_le_bytes([h[8], h[9], h[10], h[11], h[12], h[13], h[14], h[15]]),
    })
}

/// Parses a request datagram; its body is `dgram[HEADER_LEN..]`.
///
/// A receive buffer of more than [`MAX_REQUEST_LEN`] bytes makes truncation
/// harmless: a datagram that did not fit fills the buffer, so `dgram` is longer
/// than the maximum and refused, whatever the header says.
///
/// # Errors
/// Anything but a well-formed version-1 request of at most [`MAX_REQUEST_LEN`]
/// bytes.
#[inline]
pub fn parse_request(dgram: &[u8]) -> Result<Header, ParseError> {
    if dgram.len() > MAX_REQUEST_LEN {
        return Err(ParseError::TooLong(dgram.len()));
    }
    let h = decode(dgram)?;
    if h.code != CODE_REQUEST {
        return Err(ParseError::Code(h.code));
    }
    Ok(h)
}

/// Parses a response datagram into its header and status.
///
/// # Errors
/// Anything but a well-formed version-1 response.
#[inline]
pub fn parse_response(dgram: &[u8]) -> Result<(Header, Status), ParseError> {
    let h = decode(dgram)?;
    let status = Status::from_code(h.code).ok_or(ParseError::Code(h.code))?;
    Ok((h, status))
}

/// Writes a header into `out`.
#[inline]
pub fn write_header(out: &mut [u8; HEADER_LEN], code: u8, type_id: u16, body_len: u16, id: u64) {
    out[0] = VERSION;
    out[1] = code;
    out[2..4].copy_from_slice(&type_id.to_le_bytes());
    out[4..6].copy_from_slice(&body_len.to_le_bytes());
    out[6..8].fill(0);
    out[8..16].copy_from_slice(&id.to_le_bytes());
}

/// Turns the request header at the front of `dgram` into a response header in
/// place: version, status, body length; the type and id stay as they were
/// (whatever they were, for a malformed request).
#[inline]
pub fn make_response_header(dgram: &mut [u8; HEADER_LEN], status: Status, body_len: u16) {
    dgram[0] = VERSION;
    dgram[1] = status as u8;
    dgram[4..6].copy_from_slice(&body_len.to_le_bytes());
    dgram[6..8].fill(0);
}

/// Encodes a request with `body` into `out` (cleared first).
///
/// # Panics
/// If `body` is longer than [`MAX_REQUEST_BODY`].
pub fn encode_request(out: &mut Vec<u8>, type_id: u16, id: u64, body: &[u8]) {
    assert!(body.len() <= MAX_REQUEST_BODY, "request body too long");
    let mut h = [0u8; HEADER_LEN];
    write_header(&mut h, CODE_REQUEST, type_id, body.len() as u16, id);
    out.clear();
    out.extend_from_slice(&h);
    out.extend_from_slice(body);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_each_malformation() {
        let mut req = Vec::new();
        encode_request(&mut req, 7, 0xdead_beef_0000_0001, b"hello");
        let h = parse_request(&req).unwrap();
        assert_eq!((h.type_id, h.body_len, h.id), (7, 5, 0xdead_beef_0000_0001));
        assert_eq!(&req[HEADER_LEN..], b"hello");

        assert_eq!(parse_request(&req[..10]), Err(ParseError::Truncated(10)));
        assert_eq!(parse_request(&[]), Err(ParseError::Truncated(0)));
        let mut v2 = req.clone();
        v2[0] = 2;
        assert_eq!(parse_request(&v2), Err(ParseError::Version(2)));
        let mut long = req.clone();
        long[4] = 200;
        assert!(matches!(
            parse_request(&long),
            Err(ParseError::Length {
                declared: 200,
                actual: 5
            })
        ));
        assert!(matches!(
            parse_request(&req[..18]),
            Err(ParseError::Length { .. })
        ));
        let mut resp = req.clone();
        let hdr: &mut [u8; HEADER_LEN] = (&mut resp[..HEADER_LEN]).try_into().unwrap();
        make_response_header(hdr, Status::Overloaded, 0);
        resp.truncate(HEADER_LEN);
        assert_eq!(parse_request(&resp), Err(ParseError::Code(2)));
        let (rh, st) = parse_response(&resp).unwrap();
        assert_eq!(
            (rh.id, rh.type_id, st),
            (0xdead_beef_0000_0001, 7, Status::Overloaded)
        );
        resp[1] = 99;
        assert_eq!(parse_response(&resp), Err(ParseError::Code(99)));
    }

    #[test]
    fn requests_longer_than_the_maximum_are_refused_whatever_their_header_says() {
        let mut max = Vec::new();
        encode_request(&mut max, 1, 9, &[0x5a; MAX_REQUEST_BODY]);
        assert_eq!(max.len(), MAX_REQUEST_LEN);
        let h = parse_request(&max).unwrap();
        assert_eq!((h.id, usize::from(h.body_len)), (9, MAX_REQUEST_BODY));
        // One byte more, with the length field telling the truth...
        let mut over = max.clone();
        over.push(0);
        over[4..6].copy_from_slice(&(MAX_REQUEST_BODY as u16 + 1).to_le_bytes());
        assert_eq!(
            parse_request(&over),
            Err(ParseError::TooLong(MAX_REQUEST_LEN + 1))
        );
        // ...or still claiming the largest valid body (what a buffer of the
        // maximum's size would have kept of a longer datagram).
        over[4..6].copy_from_slice(&(MAX_REQUEST_BODY as u16).to_le_bytes());
        assert_eq!(
            parse_request(&over),
            Err(ParseError::TooLong(MAX_REQUEST_LEN + 1))
        );
        // Responses are not bounded by the request maximum.
        let mut resp = vec![0u8; HEADER_LEN + 4000];
        let hdr: &mut [u8; HEADER_LEN] = (&mut resp[..HEADER_LEN]).try_into().unwrap();
        write_header(hdr, Status::Ok as u8, 1, 4000, 9);
        assert_eq!(parse_response(&resp).unwrap().1, Status::Ok);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Arbitrary bytes never panic the parsers, and whatever parses is
        /// consistent with the bytes (length matches, fields read back).
        #[test]
        fn parsers_are_total_and_consistent(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            match parse_request(&bytes) {
                Ok(h) => {
                    prop_assert_eq!(bytes[0], VERSION);
                    prop_assert_eq!(bytes[1], CODE_REQUEST);
                    prop_assert_eq!(usize::from(h.body_len), bytes.len() - HEADER_LEN);
                }
                Err(ParseError::Truncated(n)) => prop_assert!(n < HEADER_LEN),
                Err(_) => prop_assert!(bytes.len() >= HEADER_LEN),
            }
            let _ = parse_response(&bytes);
        }

        /// Every encoded request parses back to what was encoded.
        #[test]
        fn encode_then_parse(type_id: u16, id: u64, body in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut out = Vec::new();
            encode_request(&mut out, type_id, id, &body);
            let h = parse_request(&out).unwrap();
            prop_assert_eq!((h.type_id, h.id, usize::from(h.body_len)), (type_id, id, body.len()));
            prop_assert_eq!(&out[HEADER_LEN..], &body[..]);
        }

        /// Mutating a valid request anywhere in the header either still parses as a
        /// request with consistent fields or fails cleanly.
        #[test]
        fn header_mutations_fail_cleanly(pos in 0usize..HEADER_LEN, val: u8, body_len in 0usize..64) {
            let mut out = Vec::new();
            encode_request(&mut out, 1, 42, &vec![0xab; body_len]);
            out[pos] = val;
            if let Ok(h) = parse_request(&out) {
                prop_assert_eq!(usize::from(h.body_len), body_len);
            }
        }
    }
}
