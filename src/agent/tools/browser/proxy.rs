//! The browser's only way out: an HTTP proxy on 127.0.0.1 that Chromium is started with
//! (`--proxy-server`, loopback included). Each connection names its host (`CONNECT host:443`
//! for HTTPS and WebSockets, an absolute URL for plain HTTP); the host is checked and
//! resolved by `web_fetch`'s rule ([`check_url`]: private, loopback and similar addresses
//! refused unless `[tools.web]` opens them) and the connection made to exactly the checked
//! addresses, so a page, a redirect or a script cannot reach chela's RPC, the panel, the
//! cloud metadata service or the LAN, not even through a name that resolves differently a
//! moment later. Chela's own RPC and panel address is refused whatever the rule opens. A
//! plain HTTP request goes on with `Connection: close`; Chromium keeps a proxy connection
//! to one destination, so one it reuses goes to the address already checked.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::{CancellationToken, DropGuard};
use url::{Host, Url};

use crate::agent::tools::web::Resolver;
use crate::agent::tools::web::fetch::check_url;
use crate::config::WebConfig;

/// Largest request head read.
const MAX_HEAD: usize = 16 * 1024;
/// How long a client has to send its request head, and a connection to be made.
const HANDSHAKE: Duration = Duration::from_secs(15);
/// Connections served at the same time.
const MAX_CONNECTIONS: usize = 128;

/// A running proxy; dropping it stops it.
pub struct Proxy {
    addr: SocketAddr,
    _stop: DropGuard,
}

impl Proxy {
    /// Starts the proxy on 127.0.0.1 (a free port) with `config`'s address rule, never
    /// connecting to `forbidden`.
    pub async fn start(
        config: WebConfig,
        resolve: Resolver,
        forbidden: Vec<SocketAddr>,
    ) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let rule = Arc::new(Rule {
            config,
            resolve,
            forbidden,
        });
        tokio::spawn(serve(listener, rule, stop.clone()));
        Ok(Proxy {
            addr,
            _stop: stop.drop_guard(),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// The address rule, the resolver and the addresses never reached.
struct Rule {
    config: WebConfig,
    resolve: Resolver,
    forbidden: Vec<SocketAddr>,
}

impl Rule {
    /// Whether `addr` is chela's own (an unspecified address there stands for every local
    /// one on that port).
    fn is_forbidden(&self, addr: SocketAddr) -> bool {
        self.forbidden.iter().any(|f| {
            f.port() == addr.port()
                && (f.ip() == addr.ip()
                    || (f.ip().is_unspecified() && addr.ip().is_loopback())
                    || (f.ip().is_loopback() && addr.ip().is_loopback()))
        })
    }
}

async fn serve(listener: TcpListener, rule: Arc<Rule>, stop: CancellationToken) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((mut client, _)) = accepted else {
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Full: refused at once rather than holding every other request up.
            tokio::spawn(async move {
                refuse(
                    &mut client,
                    "503 Service Unavailable",
                    "too many connections",
                )
                .await
            });
            continue;
        };
        let rule = rule.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                _ = handle(client, &rule) => {}
            }
            drop(slot);
        });
    }
}

/// One client connection: its request head, the check, then bytes both ways.
async fn handle(mut client: TcpStream, rule: &Rule) -> std::io::Result<()> {
    let Ok(read) = tokio::time::timeout(HANDSHAKE, read_head(&mut client)).await else {
        return Ok(());
    };
    let (head, rest) = read?;
    let request = match Request::parse(&head) {
        Ok(request) => request,
        Err(why) => return refuse(&mut client, "400 Bad Request", &why).await,
    };
    let addrs = match check_url(&rule.config, &rule.resolve, &request.url).await {
        Ok(addrs) => addrs,
        Err(e) => return refuse(&mut client, "403 Forbidden", &e.to_string()).await,
    };
    let Some(mut upstream) = connect(&request.url, addrs, rule).await else {
        return refuse(&mut client, "502 Bad Gateway", "cannot connect").await;
    };
    if request.tunnel {
        client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await?;
    } else {
        upstream.write_all(&request.origin_head()).await?;
    }
    upstream.write_all(&rest).await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// Reads up to the blank line that ends a request head; the head and what came after it.
async fn read_head(client: &mut TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too long"));
        }
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A proxied request: where it goes, and for plain HTTP its head to pass on.
#[derive(Debug)]
struct Request {
    /// `https://host:port/` for a tunnel, the request's own URL for plain HTTP.
    url: Url,
    tunnel: bool,
    method: String,
    version: String,
    headers: Vec<String>,
}

impl Request {
    fn parse(head: &str) -> Result<Request, String> {
        let mut lines = head.split("\r\n");
        let first = lines.next().unwrap_or_default();
        let mut parts = first.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("not an HTTP request".into());
        };
        let tunnel = method == "CONNECT";
        let url = if tunnel {
            Url::parse(&format!("https://{target}/"))
                .map_err(|_| format!("{target} is no host:port"))?
        } else {
            let url = Url::parse(target)
                .map_err(|_| "a proxied request needs an absolute URL".to_string())?;
            if url.scheme() != "http" {
                return Err(format!("{} is not proxied", url.scheme()));
            }
            url
        };
        if url.port_or_known_default().is_none()
            || !url.username().is_empty()
            || url.password().is_some()
        {
            return Err("bad target".into());
        }
        let headers = lines
            .filter(|l| !l.is_empty())
            .filter(|l| {
                let name = l
                    .split(':')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_ascii_lowercase();
                !matches!(
                    name.as_str(),
                    "proxy-connection" | "connection" | "keep-alive" | "proxy-authorization"
                )
            })
            .map(str::to_string)
            .collect();
        Ok(Request {
            url,
            tunnel,
            method: method.into(),
            version: version.into(),
            headers,
        })
    }

    /// The head sent to the origin: the path only, the client's headers, `Connection: close`.
    fn origin_head(&self) -> Vec<u8> {
        let mut path = self.url.path().to_string();
        if let Some(query) = self.url.query() {
            path.push('?');
            path.push_str(query);
        }
        let mut head = format!("{} {path} {}\r\n", self.method, self.version);
        for line in &self.headers {
            head.push_str(line);
            head.push_str("\r\n");
        }
        head.push_str("Connection: close\r\n\r\n");
        head.into_bytes()
    }
}

/// Connects to the checked addresses (an address literal's own when none were looked up).
async fn connect(url: &Url, addrs: Vec<SocketAddr>, rule: &Rule) -> Option<TcpStream> {
    let port = url.port_or_known_default()?;
    let addrs = if addrs.is_empty() {
        match url.host()? {
            Host::Ipv4(ip) => vec![SocketAddr::new(ip.into(), port)],
            Host::Ipv6(ip) => vec![SocketAddr::new(ip.into(), port)],
            Host::Domain(_) => return None,
        }
    } else {
        addrs
            .into_iter()
            .map(|a| SocketAddr::new(a.ip(), port))
            .collect()
    };
    for addr in addrs.into_iter().filter(|a| !rule.is_forbidden(*a)) {
        if let Ok(Ok(stream)) = tokio::time::timeout(HANDSHAKE, TcpStream::connect(addr)).await {
            return Some(stream);
        }
    }
    None
}

/// Answers `status` with `why` as the body, and closes.
async fn refuse(client: &mut TcpStream, status: &str, why: &str) -> std::io::Result<()> {
    let body = format!("chela's browser proxy: {why}\n");
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    client.write_all(head.as_bytes()).await?;
    client.write_all(body.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_name_their_host_and_lose_hop_headers() {
        let tunnel =
            Request::parse("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443").unwrap();
        assert!(tunnel.tunnel);
        assert_eq!(tunnel.url.as_str(), "https://example.com/");
        let plain = Request::parse(
            "GET http://example.com:8080/a?b=1 HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\nAccept: */*",
        )
        .unwrap();
        assert!(!plain.tunnel);
        let head = String::from_utf8(plain.origin_head()).unwrap();
        assert_eq!(
            head,
            "GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        for bad in [
            "GET /relative HTTP/1.1",
            "GET ftp://x/ HTTP/1.1",
            "nonsense",
            "CONNECT a b c d",
            "GET http://u:p@x/ HTTP/1.1",
        ] {
            assert!(Request::parse(bad).is_err(), "{bad}");
        }
    }

    fn resolver_to(ip: &'static str) -> Resolver {
        Arc::new(move |_host: String, port: u16| {
            Box::pin(async move { Ok(vec![SocketAddr::new(ip.parse().unwrap(), port)]) })
        })
    }

    async fn ask(proxy: &Proxy, head: &str) -> String {
        let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn loopback_and_names_resolving_to_it_are_refused_unless_opened() {
        let proxy = Proxy::start(WebConfig::default(), resolver_to("127.0.0.1"), Vec::new())
            .await
            .unwrap();
        let refused = ask(&proxy, "CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n").await;
        assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
        let rebound = ask(
            &proxy,
            "GET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n",
        )
        .await;
        assert!(
            rebound.starts_with("HTTP/1.1 403") && rebound.contains("loopback"),
            "{rebound}"
        );
        let metadata = ask(&proxy, "GET http://169.254.169.254/latest HTTP/1.1\r\n\r\n").await;
        assert!(metadata.starts_with("HTTP/1.1 403"), "{metadata}");
    }

    #[tokio::test]
    async fn an_opened_host_is_proxied_one_request_per_connection() {
        let origin = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = origin.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut conn, _) = origin.accept().await.unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).await.unwrap();
                got.extend_from_slice(&buf[..n]);
            }
            conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
                .await
                .unwrap();
            String::from_utf8(got).unwrap()
        });
        let config = WebConfig {
            allow_hosts: vec!["127.0.0.1".into()],
            ..WebConfig::default()
        };
        let proxy = Proxy::start(config.clone(), resolver_to("127.0.0.1"), Vec::new())
            .await
            .unwrap();
        let answer = ask(&proxy, &format!("GET http://127.0.0.1:{port}/page HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")).await;
        assert!(answer.ends_with("hi"), "{answer}");
        let seen = server.await.unwrap();
        assert!(seen.starts_with("GET /page HTTP/1.1\r\n"), "{seen}");
        assert!(
            seen.contains("Connection: close") && !seen.contains("keep-alive"),
            "{seen}"
        );
        // chela's own RPC is never reached, even on an opened host.
        let rpc = SocketAddr::new("127.0.0.1".parse().unwrap(), port);
        let guarded = Proxy::start(config, resolver_to("127.0.0.1"), vec![rpc])
            .await
            .unwrap();
        let answer = ask(
            &guarded,
            &format!("GET http://127.0.0.1:{port}/page HTTP/1.1\r\n\r\n"),
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    }
}
