//! A tiny HTTP/1.1 client over a tokio `TcpStream` for tests against the real server: one
//! connection, kept alive across requests, `Content-Length` and chunked bodies.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// One kept-alive connection.
pub struct Client {
    addr: SocketAddr,
    stream: Option<BufReader<TcpStream>>,
    token: Option<String>,
    /// Longest wait for one whole answer.
    pub timeout: Duration,
}

/// A response: status, headers (names lower-cased) and the body as text.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

impl Client {
    pub fn new(addr: SocketAddr, token: Option<&str>) -> Client {
        Client {
            addr,
            stream: None,
            token: token.map(str::to_string),
            timeout: Duration::from_secs(60),
        }
    }

    /// Sends one request and reads the answer, connecting (again) when needed. A connection
    /// the server closed between requests is reopened once.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<Reply, String> {
        let timeout = self.timeout;
        match tokio::time::timeout(timeout, self.exchange(method, path, body)).await {
            Ok(result) => result,
            Err(_) => {
                self.stream = None;
                Err(format!("{method} {path}: no answer within {timeout:?}"))
            }
        }
    }

    async fn exchange(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<Reply, String> {
        let reused = self.stream.is_some();
        match self.try_exchange(method, path, body).await {
            Ok(reply) => Ok(reply),
            // The server may close an idle kept-alive connection; a fresh one is fair.
            Err(e) if reused && e.starts_with("closed") => {
                self.stream = None;
                self.try_exchange(method, path, body).await
            }
            Err(e) => {
                self.stream = None;
                Err(format!("{method} {path}: {e}"))
            }
        }
    }

    async fn try_exchange(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<Reply, String> {
        if self.stream.is_none() {
            let stream = TcpStream::connect(self.addr)
                .await
                .map_err(|e| format!("connect: {e}"))?;
            stream.set_nodelay(true).map_err(|e| e.to_string())?;
            self.stream = Some(BufReader::new(stream));
        }
        let stream = self.stream.as_mut().expect("connected");
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.addr);
        if let Some(t) = &self.token {
            head.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        let body = body.unwrap_or("");
        if !body.is_empty() || method == "POST" || method == "PUT" {
            head.push_str("Content-Type: application/json\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        stream
            .get_mut()
            .write_all(&bytes)
            .await
            .map_err(|e| format!("closed while writing: {e}"))?;
        let reply = read_reply(stream).await?;
        if reply
            .header("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"))
        {
            self.stream = None;
        }
        Ok(reply)
    }
}

async fn read_reply(stream: &mut BufReader<TcpStream>) -> Result<Reply, String> {
    let mut line = String::new();
    let n = stream
        .read_line(&mut line)
        .await
        .map_err(|e| format!("closed while reading: {e}"))?;
    if n == 0 {
        return Err("closed before the status line".into());
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {line:?}"))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        stream
            .read_line(&mut line)
            .await
            .map_err(|e| format!("reading headers: {e}"))?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((name, value)) = l.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if let Some(len) = find("content-length") {
        let len: usize = len.parse().map_err(|_| "bad content-length")?;
        body.resize(len, 0);
        stream
            .read_exact(&mut body)
            .await
            .map_err(|e| format!("reading body: {e}"))?;
    } else if find("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            stream
                .read_line(&mut line)
                .await
                .map_err(|e| format!("reading chunk size: {e}"))?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| format!("bad chunk size {line:?}"))?;
            let mut chunk = vec![0; size + 2];
            stream
                .read_exact(&mut chunk)
                .await
                .map_err(|e| format!("reading chunk: {e}"))?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    Ok(Reply {
        status,
        headers,
        body: String::from_utf8(body).map_err(|e| format!("body is not UTF-8: {e}"))?,
    })
}
