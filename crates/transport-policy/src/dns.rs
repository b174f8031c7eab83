//! A small DNS stub client that keeps the answer's AD bit (RFC 4035 3.2.3: the validating
//! resolver's statement that it validated the answer).
//!
//! hickory-resolver 0.26 sets neither DO nor AD in its queries unless it validates itself, so
//! a validating resolver would never say "authentic". DANE trusts the configured resolver the
//! way Postfix does (a local validating resolver, RFC 7672 1.3): the query here carries EDNS
//! with DO and the AD bit (RFC 6840 5.7), goes over UDP (TCP when the answer is truncated),
//! and the response's header is read directly.

use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpStream, UdpSocket};

/// The EDNS payload size we announce (the DNS flag day 2020 value: no IP fragmentation).
const EDNS_PAYLOAD_BYTES: u16 = 1232;
/// Largest UDP datagram read; a longer one is truncated by the kernel and fails to parse.
const UDP_RESPONSE_BYTES_MAX: usize = 4096;
/// Most records of one answer section kept; more make the answer a failure.
const ANSWER_RECORDS_MAX: usize = 256;

/// One response: what the resolver said, whether it vouched for it, and the answer records of
/// the type asked (CNAMEs followed by the resolver are left out).
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    pub(crate) rcode: ResponseCode,
    /// The AD bit: the resolver validated the answer (or the denial) with DNSSEC.
    pub(crate) authentic: bool,
    pub(crate) records: Vec<RData>,
}

impl Answer {
    pub(crate) fn nxdomain(&self) -> bool {
        self.rcode == ResponseCode::NXDomain
    }
}

/// Why there is no answer at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DnsError {
    #[error("no resolver configured")]
    NoResolver,
    #[error("invalid name {0:?}")]
    BadName(String),
    #[error("DNS {0}")]
    Io(String),
    #[error("DNS timed out")]
    Timeout,
    /// SERVFAIL and the like: for a signed zone, a bogus answer (RFC 4035 5.5).
    #[error("DNS answered {0}")]
    Rcode(String),
}

/// The configured resolvers, asked in order.
#[derive(Clone, Debug)]
pub(crate) struct Dns {
    servers: Vec<SocketAddr>,
    timeout: Duration,
}

impl Dns {
    pub(crate) fn new(servers: Vec<SocketAddr>, timeout: Duration) -> Dns {
        Dns { servers, timeout }
    }

    /// Asks each resolver in turn until one answers NOERROR or NXDOMAIN; the last failure
    /// otherwise.
    pub(crate) async fn query(&self, name: &str, kind: RecordType) -> Result<Answer, DnsError> {
        let name = Name::from_ascii(name)
            .map(|mut n| {
                n.set_fqdn(true);
                n
            })
            .map_err(|_| DnsError::BadName(name.chars().take(80).collect()))?;
        let mut last = DnsError::NoResolver;
        for server in &self.servers {
            match tokio::time::timeout(self.timeout, exchange(*server, &name, kind)).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(e)) => last = e,
                Err(_) => last = DnsError::Timeout,
            }
        }
        Err(last)
    }
}

fn request(name: &Name, kind: RecordType) -> Message {
    let mut message = Message::query();
    message.add_query(Query::query(name.clone(), kind));
    message.metadata.recursion_desired = true;
    // RFC 6840 5.7: AD in a query asks for AD in the response; DO (RFC 3225) too, and makes
    // the resolver report validation failures as SERVFAIL rather than hide them.
    message.metadata.authentic_data = true;
    let mut edns = Edns::new();
    edns.set_max_payload(EDNS_PAYLOAD_BYTES).set_dnssec_ok(true);
    message.set_edns(edns);
    message
}

async fn exchange(server: SocketAddr, name: &Name, kind: RecordType) -> Result<Answer, DnsError> {
    let query = request(name, kind);
    let bytes = query.to_vec().map_err(|e| DnsError::Io(e.to_string()))?;
    let local: SocketAddr = if server.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        ([0u16; 8], 0).into()
    };
    let socket = UdpSocket::bind(local).await.map_err(io)?;
    socket.connect(server).await.map_err(io)?;
    socket.send(&bytes).await.map_err(io)?;
    let mut buffer = vec![0u8; UDP_RESPONSE_BYTES_MAX];
    let response = loop {
        let read = socket.recv(&mut buffer).await.map_err(io)?;
        // A datagram that is not the answer to this question (late, spoofed) is skipped; the
        // caller's timeout bounds the wait.
        match Message::from_vec(&buffer[..read]) {
            Ok(response) if answers(&query, &response) => break response,
            _ => continue,
        }
    };
    let response = if response.metadata.truncation {
        exchange_tcp(server, &query, &bytes).await?
    } else {
        response
    };
    answer(response, kind)
}

/// RFC 7766: the same query over TCP, each message after its two-byte length.
async fn exchange_tcp(
    server: SocketAddr,
    query: &Message,
    bytes: &[u8],
) -> Result<Message, DnsError> {
    let mut stream = TcpStream::connect(server).await.map_err(io)?;
    let length = u16::try_from(bytes.len()).map_err(|_| DnsError::Io("query too long".into()))?;
    let mut framed = length.to_be_bytes().to_vec();
    framed.extend_from_slice(bytes);
    stream.write_all(&framed).await.map_err(io)?;
    let length = usize::from(stream.read_u16().await.map_err(io)?);
    // At most 64 KiB by construction (a two-byte length).
    let mut buffer = vec![0u8; length];
    stream.read_exact(&mut buffer).await.map_err(io)?;
    let response = Message::from_vec(&buffer).map_err(|e| DnsError::Io(e.to_string()))?;
    if !answers(query, &response) {
        return Err(DnsError::Io("TCP answer does not match the query".into()));
    }
    Ok(response)
}

fn answers(query: &Message, response: &Message) -> bool {
    response.metadata.message_type == MessageType::Response
        && response.metadata.id == query.metadata.id
        && response.queries.len() == 1
        && query.queries.first().is_some_and(|asked| {
            let got = &response.queries[0];
            // Name equality ignores ASCII case (RFC 4343).
            got.query_type() == asked.query_type() && got.name() == asked.name()
        })
}

fn answer(response: Message, kind: RecordType) -> Result<Answer, DnsError> {
    let rcode = response.metadata.response_code;
    if rcode != ResponseCode::NoError && rcode != ResponseCode::NXDomain {
        return Err(DnsError::Rcode(rcode.to_string()));
    }
    if response.answers.len() > ANSWER_RECORDS_MAX {
        return Err(DnsError::Io("too many records in the answer".into()));
    }
    let records = response
        .answers
        .into_iter()
        .filter(|record: &Record| record.record_type() == kind)
        .map(|record| record.data)
        .collect();
    Ok(Answer {
        rcode,
        authentic: response.metadata.authentic_data,
        records,
    })
}

fn io(e: std::io::Error) -> DnsError {
    DnsError::Io(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_asks_for_dnssec_status() {
        let name = Name::from_ascii("_25._tcp.mx.example.").unwrap();
        let query = request(&name, RecordType::TLSA);
        let parsed = Message::from_vec(&query.to_vec().unwrap()).unwrap();
        assert!(parsed.metadata.authentic_data);
        assert!(parsed.metadata.recursion_desired);
        assert!(parsed.edns.as_ref().unwrap().flags().dnssec_ok);
        assert_eq!(parsed.queries[0].query_type(), RecordType::TLSA);
    }

    #[test]
    fn servfail_is_an_error_and_ad_is_read() {
        let name = Name::from_ascii("example.").unwrap();
        let query = request(&name, RecordType::MX);
        let mut response = Message::response(query.metadata.id, query.metadata.op_code);
        response.add_query(Query::query(name.clone(), RecordType::MX));
        response.metadata.authentic_data = true;
        assert!(answers(&query, &response));
        let parsed = answer(response.clone(), RecordType::MX).unwrap();
        assert!(parsed.authentic);
        assert!(parsed.records.is_empty());
        response.metadata.response_code = ResponseCode::ServFail;
        assert!(matches!(
            answer(response.clone(), RecordType::MX),
            Err(DnsError::Rcode(_))
        ));
        response.metadata.id = query.metadata.id.wrapping_add(1);
        assert!(!answers(&query, &response));
    }

    #[tokio::test]
    async fn a_silent_resolver_times_out() {
        // A bound UDP socket that never answers.
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let dns = Dns::new(
            vec![silent.local_addr().unwrap()],
            Duration::from_millis(200),
        );
        assert_eq!(
            dns.query("example.", RecordType::MX).await.unwrap_err(),
            DnsError::Timeout
        );
        assert_eq!(
            Dns::new(Vec::new(), Duration::from_secs(1))
                .query("example.", RecordType::MX)
                .await
                .unwrap_err(),
            DnsError::NoResolver
        );
    }
}
