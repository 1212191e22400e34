//! A scripted HTTP server on loopback, for answers no well-behaved server gives: a huge
//! `Retry-After`, a redirect to another server, a 401 that echoes the request's headers.
//! Each request's head is kept, so a test can tell what a server was sent.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// One request as the server read it.
#[derive(Clone, Debug)]
pub struct Request {
    /// `GET /path?query HTTP/1.1`.
    pub line: String,
    /// The request line and every header line, as sent.
    pub head: String,
}

impl Request {
    /// The path and query of the request line.
    pub fn target(&self) -> &str {
        self.line.split_whitespace().nth(1).unwrap_or("")
    }

    /// A header's value (names compared without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then_some(value.trim())
        })
    }
}

/// The status line, headers and body of one answer.
pub struct Reply {
    pub status: &'static str,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn json(status: &'static str, body: impl Into<String>) -> Reply {
        Reply {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.into(),
        }
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Reply {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

type Script = dyn Fn(&Request) -> Reply + Send + Sync;

pub struct Scripted {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Scripted {
    /// A server that answers each request with what `script` makes of it, one request a
    /// connection.
    pub fn start(script: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let log = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (script, log) = (script.clone(), log.clone());
                std::thread::spawn(move || {
                    let _ = answer(stream, &*script, &log);
                });
            }
        });
        Scripted { base, requests }
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn answer(
    mut stream: std::net::TcpStream,
    script: &Script,
    log: &Mutex<Vec<Request>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut head = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if line.trim_end().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let request = Request {
        line: head.lines().next().unwrap_or("").to_string(),
        head,
    };
    let reply = script(&request);
    log.lock().unwrap().push(request);
    let mut text = format!("HTTP/1.1 {}\r\n", reply.status);
    for (name, value) in &reply.headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
        reply.body.len(),
        reply.body
    ));
    stream.write_all(text.as_bytes())?;
    stream.flush()
}
