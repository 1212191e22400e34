//! `onceonly mock-provider`: a provider listing API on loopback, with faults on demand.
//!
//! It serves the objects of a provider state file (`{"objects": [{"id", "created", …}]}`, the
//! format the real-Airflow fixture generator writes; other top-level keys are ignored) at
//! `GET /exports`, sorted by `created` then `id` (Stripe's newest first), in one of seven
//! pagination styles:
//!
//! | style | request | body |
//! |---|---|---|
//! | `cursor` | `?cursor=T` | `{"data": […], "has_more": b, "next_cursor": T or null}` |
//! | `link` | the URL of the `Link: <…>; rel="next"` header (every page also links `rel="first"`) | `{"data": […]}` |
//! | `link-body` | the URL in the body | `{"data": […], "links": {"next": URL or null}}` |
//! | `page` | `?page=N` (from 1) | `{"data": […], "total": n, "has_more": b, "page": N}` |
//! | `offset` | `?offset=N` (from 0) | `{"data": […], "total": n, "has_more": b}` |
//! | `stripe` | `?starting_after=ID` (the last object's id) | `{"object": "list", "data": […], "has_more": b}` |
//! | `relay` | `?after=C` (and `first`) | `{"nodes": […], "pageInfo": {"hasNextPage": b, "endCursor": C or null}, "totalCount": n}` |
//!
//! Every style takes `limit` (the page size, default `--page-size`; relay's `first` as well)
//! and `created_after` / `created_before` (RFC 3339 or epoch seconds/milliseconds, both bounds
//! inclusive). Cursors are keyset cursors (the last object's created time and id), as real
//! cursor APIs use; relay's are opaque (base64).
//!
//! Faults (`--fault KIND@N` on the Nth listing request, `KIND%K` on every Kth, `=VALUE`
//! for a parameter): `rate-limit` (429 with `Retry-After: VALUE` seconds, default 1),
//! `rate-limit-date` (the same as an HTTP date), `server-error` (500), `slow` (VALUE ms more,
//! default 1000), `drop` (the connection closes without an answer), `truncated` (the body
//! cut in half), `invalid-json` (an HTML error page with status 200), `repeat-cursor` (the
//! next cursor or link is the one just used), `insert` (once the page is served, VALUE new
//! objects, default 1, newer than all others, join the listing, as another client's exports
//! would), `delete` (once the page is served, its first object leaves the listing: every later
//! page of a page or offset listing starts one object later), `change` (before the answer,
//! one object created before all others appears, and every object's status becomes `voided`),
//! `missing-field` (the first object on the page lacks `id`), `mistyped-field` (its
//! `created` is not a time), `huge` (a valid page padded to VALUE MiB, default 80),
//! `gzip-bomb` (a valid page, gzipped, that unpacks to VALUE MiB, default 100, from a body
//! of about a thousandth of that), `clamp` (at most VALUE objects a page whatever `limit`
//! asks, the style's own "more" signals kept true; `clamp=N` alone clamps every request, as
//! providers that cap their page size do), `lose-next` (the page says more follow but names no
//! way on: no `next_cursor` key, no `Link` header, no `links.next`; for page, offset and
//! stripe an empty `data`, for relay a null `endCursor`, with `has_more`/`hasNextPage` true).
//!
//! `--newest-first` serves page and offset listings newest first, as many providers list (a
//! new object then shifts every page after the first one object later). Stripe's listing is
//! newest first whatever it says; the keyset cursors of the other styles list oldest first.
//!
//! The server is a small hand-written HTTP/1.1 (one request per connection) over tokio, to
//! add no dependencies. It only ever binds a loopback address.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::error::{Error, Location, Result};
use crate::timestamp;

/// How the mock pages its listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MockPagination {
    Cursor,
    Link,
    LinkBody,
    Page,
    Offset,
    Stripe,
    Relay,
}

/// When a fault strikes: on the Nth listing request, or on every Kth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    At(usize),
    Every(usize),
}

impl Trigger {
    fn fires(self, request: usize) -> bool {
        match self {
            Trigger::At(n) => request == n,
            Trigger::Every(k) => request.is_multiple_of(k),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// 429 with `Retry-After` in seconds (`http_date`: as an HTTP date).
    RateLimit {
        seconds: u64,
        http_date: bool,
    },
    ServerError,
    Slow(Duration),
    Drop,
    Truncated,
    InvalidJson,
    RepeatCursor,
    /// Once the page is served, this many objects newer than all others join the listing.
    Insert(usize),
    /// Once the page is served, its first object leaves the listing.
    Delete,
    /// One new object before all others, and every object's status becomes `voided`.
    Change,
    MissingField,
    MistypedField,
    /// A valid page padded with whitespace to this many MiB.
    Huge(u64),
    /// A valid page, gzipped, that unpacks to this many MiB.
    GzipBomb(u64),
    /// At most this many objects a page, whatever `limit` asks.
    Clamp(usize),
    /// The page says more follow but names no way on.
    LoseNext,
}

/// A switchable fault: `rate-limit@3`, `server-error%2`, `slow@2=1500`, `insert@2=3`, ….
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    pub trigger: Trigger,
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(text: &str) -> Result<Fault, String> {
        let usage = || {
            format!(
                "{text:?}: write KIND@N (the Nth request) or KIND%K (every Kth), optionally =VALUE; \
                 KIND is rate-limit, rate-limit-date, server-error, slow, drop, truncated, \
                 invalid-json, repeat-cursor, insert, delete, change, missing-field, mistyped-field, \
                 huge, gzip-bomb, clamp or lose-next; clamp=N alone clamps every request"
            )
        };
        let (head, value) = match text.split_once('=') {
            Some((head, value)) => (head, Some(value)),
            None => (text, None),
        };
        let (kind, trigger) = if let Some((kind, n)) = head.split_once('@') {
            (kind, Trigger::At(n.parse().map_err(|_| usage())?))
        } else if let Some((kind, k)) = head.split_once('%') {
            (kind, Trigger::Every(k.parse().map_err(|_| usage())?))
        } else if head == "clamp" && value.is_some() {
            (head, Trigger::Every(1))
        } else {
            return Err(usage());
        };
        if matches!(trigger, Trigger::At(0) | Trigger::Every(0)) {
            return Err(format!("{text:?}: requests are counted from 1"));
        }
        let number = |default: u64| -> Result<u64, String> {
            value.map_or(Ok(default), |value| value.parse().map_err(|_| usage()))
        };
        let kind = match kind {
            "rate-limit" => FaultKind::RateLimit {
                seconds: number(1)?,
                http_date: false,
            },
            "rate-limit-date" => FaultKind::RateLimit {
                seconds: number(2)?,
                http_date: true,
            },
            "server-error" => FaultKind::ServerError,
            "slow" => FaultKind::Slow(Duration::from_millis(number(1000)?)),
            "drop" => FaultKind::Drop,
            "truncated" => FaultKind::Truncated,
            "invalid-json" => FaultKind::InvalidJson,
            "repeat-cursor" => FaultKind::RepeatCursor,
            "insert" => FaultKind::Insert(number(1)?.max(1) as usize),
            "delete" => FaultKind::Delete,
            "change" => FaultKind::Change,
            "missing-field" => FaultKind::MissingField,
            "mistyped-field" => FaultKind::MistypedField,
            "huge" => FaultKind::Huge(number(80)?),
            "gzip-bomb" => FaultKind::GzipBomb(number(100)?),
            "clamp" => FaultKind::Clamp(number(1)?.max(1) as usize),
            "lose-next" => FaultKind::LoseNext,
            _ => return Err(usage()),
        };
        Ok(Fault { kind, trigger })
    }
}

/// What the mock serves and how.
#[derive(Debug, Clone)]
pub struct MockOptions {
    /// The provider's objects, as in the state file.
    pub objects: Vec<Value>,
    pub pagination: MockPagination,
    pub page_size: usize,
    /// Added before every answer.
    pub latency: Duration,
    pub faults: Vec<Fault>,
    /// Page and offset listings newest first (Stripe's always is).
    pub newest_first: bool,
    /// Appends `METHOD TARGET` for every request to this file.
    pub request_log: Option<PathBuf>,
    /// When set, a request without exactly this `Authorization` (or other) header is refused
    /// with 401: `(header name, value)`.
    pub require_header: Option<(String, String)>,
}

impl MockOptions {
    pub fn new(objects: Vec<Value>, pagination: MockPagination) -> MockOptions {
        MockOptions {
            objects,
            pagination,
            page_size: 3,
            latency: Duration::ZERO,
            faults: Vec::new(),
            newest_first: false,
            request_log: None,
            require_header: None,
        }
    }
}

/// Reads the `objects` of a provider state file; each needs an `id` and a `created` time.
pub fn load_state(path: &Path) -> Result<Vec<Value>> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| Error::io(&shown, err))?;
    let state: Value = serde_json::from_str(&text).map_err(|err| {
        Error::input(
            Location::source(&shown).row(err.line()),
            format!("not valid JSON: {err}"),
        )
    })?;
    let objects = state
        .get("objects")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            Error::input(
                Location::source(&shown),
                "a provider state file holds {\"objects\": [...]}",
            )
        })?;
    for (index, object) in objects.iter().enumerate() {
        if object.get("id").and_then(Value::as_str).is_none() || created(object).is_none() {
            return Err(Error::input(
                Location::source(&shown).row(index + 1),
                "each object needs a text `id` and a `created` time",
            ));
        }
    }
    Ok(objects.clone())
}

fn created(object: &Value) -> Option<i64> {
    match object.get("created")? {
        Value::String(text) => timestamp::parse(text),
        Value::Number(number) => number.as_f64().and_then(timestamp::from_epoch_number),
        _ => None,
    }
}

/// A running mock: its address, the requests it saw, and a handle that stops it.
pub struct MockProvider {
    pub addr: SocketAddr,
    state: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MockProvider {
    /// The listing endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/exports", self.addr)
    }

    /// Every request so far, `METHOD TARGET`, in arrival order.
    pub fn requests(&self) -> Vec<String> {
        self.state.log.lock().expect("log lock").clone()
    }

    /// Stops the server and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for MockProvider {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// An object as the mock keeps it: its JSON text is written once, and every page that lists
/// the object copies that text instead of writing the object again.
struct Stored {
    created: i64,
    id: String,
    object: Value,
    text: Box<RawValue>,
}

impl Stored {
    fn new(created: i64, id: String, object: Value) -> Stored {
        let text = serde_json::value::to_raw_value(&object).expect("a JSON value writes to text");
        Stored {
            created,
            id,
            object,
            text,
        }
    }

    /// Changes the object, and its text with it.
    fn change(&mut self, change: impl FnOnce(&mut Value)) {
        change(&mut self.object);
        self.text =
            serde_json::value::to_raw_value(&self.object).expect("a JSON value writes to text");
    }
}

struct Shared {
    options: MockOptions,
    /// Sorted by (created, id); faults may insert and change.
    objects: Mutex<Vec<Stored>>,
    requests: Mutex<usize>,
    inserted: Mutex<usize>,
    log: Mutex<Vec<String>>,
    addr: SocketAddr,
}

/// Starts the mock on `127.0.0.1:port` (0: a free port) in a thread of its own, so tests and
/// the demo can use it from synchronous code.
pub fn start(options: MockOptions, port: u16) -> Result<MockProvider> {
    start_on(SocketAddr::from(([127, 0, 0, 1], port)), options)
}

fn start_on(addr: SocketAddr, options: MockOptions) -> Result<MockProvider> {
    if !addr.ip().is_loopback() {
        return Err(Error::usage(
            "--bind",
            format!("{}: the mock provider only listens on loopback", addr.ip()),
        ));
    }
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|err| Error::io(format!("binding {addr}"), err))?;
    listener
        .set_nonblocking(true)
        .map_err(|err| Error::io(format!("binding {addr}"), err))?;
    let addr = listener
        .local_addr()
        .map_err(|err| Error::io(format!("binding {addr}"), err))?;
    let mut objects: Vec<Stored> = options
        .objects
        .iter()
        .filter_map(|object| {
            Some(Stored::new(
                created(object)?,
                object.get("id")?.as_str()?.to_string(),
                object.clone(),
            ))
        })
        .collect();
    objects.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
    let state = Arc::new(Shared {
        options,
        objects: Mutex::new(objects),
        requests: Mutex::new(0),
        inserted: Mutex::new(0),
        log: Mutex::new(Vec::new()),
        addr,
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|err| Error::io("the mock provider's runtime", err))?;
    let served = state.clone();
    let thread = std::thread::Builder::new()
        .name("mock-provider".into())
        .spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = TcpListener::from_std(listener) else {
                    return;
                };
                let accept = async {
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            continue;
                        };
                        let state = served.clone();
                        tokio::spawn(async move {
                            let _ = serve(stream, &state).await;
                        });
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stopped => {}
                }
            });
            runtime.shutdown_timeout(Duration::from_millis(100));
        })
        .map_err(|err| Error::io("the mock provider's thread", err))?;
    Ok(MockProvider {
        addr,
        state,
        stop: Some(stop),
        thread: Some(thread),
    })
}

/// The `mock-provider` subcommand: serve until interrupted.
pub fn run(state_file: &Path, bind: &str, port: u16, mut options: MockOptions) -> Result<()> {
    let ip: IpAddr = bind.parse().map_err(|_| {
        Error::usage(
            "--bind",
            format!("{bind:?} is not an IP address (use 127.0.0.1)"),
        )
    })?;
    if !ip.is_loopback() {
        return Err(Error::usage(
            "--bind",
            format!("{ip}: the mock provider only listens on loopback"),
        ));
    }
    options.objects = load_state(state_file)?;
    let count = options.objects.len();
    let mock = start_on(SocketAddr::new(ip, port), options)?;
    crate::output::stdout(&format!("{}\n", mock.url()))?;
    let _ = std::io::stdout().flush();
    eprintln!(
        "mock provider: {count} objects from {} on {} (Ctrl-C stops it)",
        state_file.display(),
        mock.url()
    );
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| Error::io("the async runtime", err))?
        .block_on(async {
            let _ = tokio::signal::ctrl_c().await;
        });
    mock.stop();
    Ok(())
}

/// One connection: one request, one answer (or a fault), then close.
async fn serve(mut stream: TcpStream, state: &Shared) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).await?;
        if read == 0 || head.len() > 64 * 1024 {
            return Ok(());
        }
        head.extend_from_slice(&buffer[..read]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or("").split_whitespace();
    let method = request_line.next().unwrap_or("").to_string();
    let target = request_line.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .take_while(|line| !line.is_empty())
        .filter_map(|line| {
            let (name, value) = line.split_once(':')?;
            Some((name.trim().to_ascii_lowercase(), value.trim().to_string()))
        })
        .collect();
    let entry = format!("{method} {target}");
    state.log.lock().expect("log lock").push(entry.clone());
    if let Some(path) = &state.options.request_log
        && let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        // One write of the whole line: connections are served side by side, and `writeln!`
        // writes the entry and its newline apart, so two requests' lines could interleave.
        let _ = file.write_all(format!("{entry}\n").as_bytes());
    }

    let answer = answer(state, &method, &target, &headers);
    if !state.options.latency.is_zero() {
        tokio::time::sleep(state.options.latency).await;
    }
    if let Some(extra) = answer.delay {
        tokio::time::sleep(extra).await;
    }
    if answer.drop {
        return Ok(());
    }
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        answer.status,
        reason(answer.status),
        answer.content_type,
        answer.body.len() as u64 + answer.padding
    );
    for (name, value) in &answer.headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    // Head and body in one write, with Nagle off: a head sent alone would make every page
    // wait for the client's delayed ACK (about 40 ms a page).
    let _ = stream.set_nodelay(true);
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&answer.body);
    stream.write_all(&bytes).await?;
    // Padding is streamed, not held: a `huge` page costs the mock no memory.
    let spaces = [b' '; 64 * 1024];
    let mut left = answer.padding;
    while left > 0 {
        let now = left.min(spaces.len() as u64) as usize;
        stream.write_all(&spaces[..now]).await?;
        left -= now as u64;
    }
    stream.shutdown().await
}

struct Answer {
    status: u16,
    content_type: &'static str,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Spaces sent after `body` (JSON allows trailing whitespace).
    padding: u64,
    delay: Option<Duration>,
    drop: bool,
    /// The id of the page's first object, if it has one (for `delete`).
    first_id: Option<String>,
}

impl Answer {
    /// A listing page: `body` with the objects' texts as the array at `key`, written as the
    /// `Value` with those objects at `key` would be.
    fn page(mut body: Value, key: &str, items: &[&RawValue]) -> Answer {
        body[key] = Value::Null;
        let Value::Object(entries) = &body else {
            unreachable!("a page's body is an object")
        };
        let mut answer = Answer::json(200, &Value::Null);
        answer.body = serde_json::to_vec(&WithItems {
            entries,
            key,
            items,
        })
        .expect("JSON writes to memory");
        answer
    }

    /// The page whose first object is `first`.
    fn served(mut self, first: Option<&&Stored>) -> Answer {
        self.first_id = first.map(|stored| stored.id.clone());
        self
    }

    fn json(status: u16, body: &Value) -> Answer {
        Answer {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            body: body.to_string().into_bytes(),
            padding: 0,
            delay: None,
            drop: false,
            first_id: None,
        }
    }
}

/// A page's entries with the objects' texts in the place of `key`'s value.
struct WithItems<'a> {
    entries: &'a serde_json::Map<String, Value>,
    key: &'a str,
    items: &'a [&'a RawValue],
}

impl serde::Serialize for WithItems<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (name, value) in self.entries {
            if name == self.key {
                map.serialize_entry(name, self.items)?;
            } else {
                map.serialize_entry(name, value)?;
            }
        }
        map.end()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "",
    }
}

fn answer(state: &Shared, method: &str, target: &str, headers: &[(String, String)]) -> Answer {
    let error = |status: u16, message: &str| Answer::json(status, &json!({ "error": message }));
    if method != "GET" {
        return error(405, "the listing is read with GET");
    }
    let Ok(url) = reqwest::Url::parse(&format!("http://{}{target}", state.addr)) else {
        return error(400, "bad request target");
    };
    if url.path() != "/exports" {
        return error(404, "the listing is at /exports");
    }
    if let Some((name, value)) = &state.options.require_header {
        let given = headers
            .iter()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| value);
        if given != Some(value) {
            return error(401, "missing or wrong credentials");
        }
    }
    let request = {
        let mut requests = state.requests.lock().expect("requests lock");
        *requests += 1;
        *requests
    };
    let faults: Vec<FaultKind> = state
        .options
        .faults
        .iter()
        .filter(|fault| fault.trigger.fires(request))
        .map(|fault| fault.kind)
        .collect();

    let mut delay = None;
    for fault in &faults {
        match *fault {
            FaultKind::RateLimit { seconds, http_date } => {
                let value = if http_date {
                    (chrono::Utc::now() + chrono::Duration::seconds(seconds as i64))
                        .format("%a, %d %b %Y %H:%M:%S GMT")
                        .to_string()
                } else {
                    seconds.to_string()
                };
                let mut answer = error(429, "slow down");
                answer.headers.push(("Retry-After".into(), value));
                return answer;
            }
            FaultKind::ServerError => return error(500, "internal error"),
            FaultKind::Drop => {
                let mut answer = error(500, "dropped");
                answer.drop = true;
                return answer;
            }
            FaultKind::Slow(extra) => delay = Some(extra),
            FaultKind::Change => {
                insert_oldest(state);
                for stored in state.objects.lock().expect("objects lock").iter_mut() {
                    stored.change(|object| object["status"] = json!("voided"));
                }
            }
            _ => {}
        }
    }

    let params: BTreeMap<String, String> = url.query_pairs().into_owned().collect();
    let mut answer = match listing(state, &url, &params, &faults) {
        Ok(answer) => answer,
        Err(message) => return error(400, &message),
    };
    answer.delay = delay;
    // Other clients change the listing once this page has been served.
    for fault in &faults {
        match *fault {
            FaultKind::Insert(count) => insert_newest(state, count),
            FaultKind::Delete => {
                if let Some(id) = &answer.first_id {
                    let mut objects = state.objects.lock().expect("objects lock");
                    objects.retain(|stored| &stored.id != id);
                }
            }
            _ => {}
        }
    }
    let damage =
        faults.contains(&FaultKind::MissingField) || faults.contains(&FaultKind::MistypedField);
    if damage {
        let mut body: Value = serde_json::from_slice(&answer.body).expect("the mock's own JSON");
        let items = if body["nodes"].is_array() {
            "nodes"
        } else {
            "data"
        };
        if let Some(object) = body[items].get_mut(0).and_then(Value::as_object_mut) {
            if faults.contains(&FaultKind::MissingField) {
                object.remove("id");
            }
            if faults.contains(&FaultKind::MistypedField) {
                object.insert("created".into(), json!("not a time"));
            }
        }
        answer.body = body.to_string().into_bytes();
    }
    if faults.contains(&FaultKind::Truncated) {
        let half = answer.body.len() / 2;
        answer.body.truncate(half);
    }
    if faults.contains(&FaultKind::InvalidJson) {
        answer.content_type = "text/html";
        answer.body = b"<html><body><h1>Service temporarily overloaded</h1></body></html>".to_vec();
    }
    for fault in &faults {
        match *fault {
            FaultKind::Huge(mib) => {
                answer.padding = (mib << 20).saturating_sub(answer.body.len() as u64);
            }
            FaultKind::GzipBomb(mib) => {
                let padding = (mib << 20).saturating_sub(answer.body.len() as u64);
                answer.body = gzip_padded(&answer.body, padding);
                answer
                    .headers
                    .push(("Content-Encoding".into(), "gzip".into()));
            }
            _ => {}
        }
    }
    answer
}

/// `body` followed by `padding` spaces, gzipped: the spaces pack about a thousand to one.
fn gzip_padded(body: &[u8], padding: u64) -> Vec<u8> {
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let spaces = [b' '; 64 * 1024];
    let mut left = padding;
    let mut write = || -> std::io::Result<Vec<u8>> {
        gzip.write_all(body)?;
        while left > 0 {
            let now = left.min(spaces.len() as u64) as usize;
            gzip.write_all(&spaces[..now])?;
            left -= now as u64;
        }
        gzip.try_finish()?;
        Ok(std::mem::take(gzip.get_mut()))
    };
    write().expect("gzip into memory cannot fail")
}

/// A new object created a second before all others (`change`): an oldest-first page or
/// offset listing in progress shifts.
fn insert_oldest(state: &Shared) {
    let mut objects = state.objects.lock().expect("objects lock");
    let earliest = objects.first().map(|o| o.created).unwrap_or(0);
    let stored = new_object(state, earliest.div_euclid(1_000_000) - 1);
    objects.insert(0, stored);
}

/// New objects created after all others, a second apart (`insert`): a newest-first page or
/// offset listing in progress shifts.
fn insert_newest(state: &Shared, count: usize) {
    let mut objects = state.objects.lock().expect("objects lock");
    for _ in 0..count {
        let latest = objects.last().map(|o| o.created).unwrap_or(0);
        let stored = new_object(state, latest.div_euclid(1_000_000) + 1);
        objects.push(stored);
    }
}

/// A live object of no operation, created at `seconds`.
fn new_object(state: &Shared, seconds: i64) -> Stored {
    let mut inserted = state.inserted.lock().expect("inserted lock");
    *inserted += 1;
    let id = format!("exp_inserted_{:04}", *inserted);
    let object = json!({
        "id": id,
        "created": seconds,
        "status": "live",
        "idempotency_key": format!("inserted:{}", *inserted),
        "payload_sha256": null,
        "metadata": {},
    });
    Stored::new(seconds * 1_000_000, id, object)
}

/// One page of the listing, as the configured style serves it (faults applied that change
/// what the page holds: `repeat-cursor`, `clamp`, `lose-next`).
fn listing(
    state: &Shared,
    url: &reqwest::Url,
    params: &BTreeMap<String, String>,
    faults: &[FaultKind],
) -> Result<Answer, String> {
    let repeat_cursor = faults.contains(&FaultKind::RepeatCursor);
    let lose_next = faults.contains(&FaultKind::LoseNext);
    let style = state.options.pagination;
    let bound = |name: &str| -> Result<Option<i64>, String> {
        match params.get(name) {
            None => Ok(None),
            Some(text) => timestamp::parse(text)
                .map(Some)
                .ok_or_else(|| format!("{name}={text:?} is not a time")),
        }
    };
    let after = bound("created_after")?;
    let before = bound("created_before")?;
    let asked = match params.get("limit").or(params
        .get("first")
        .filter(|_| style == MockPagination::Relay))
    {
        None => state.options.page_size,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("limit={text:?} is not a page size"))?,
    };
    // A clamping provider serves fewer than asked, and says nothing about it.
    let limit = faults
        .iter()
        .filter_map(|fault| match fault {
            FaultKind::Clamp(most) => Some(*most),
            _ => None,
        })
        .fold(asked, usize::min);
    let objects = state.objects.lock().expect("objects lock");
    // Objects are kept in (created, id) order: the window is found by binary search, not by a
    // scan per page, so serving a whole listing stays linear in its objects.
    let low = after.map_or(0, |a| objects.partition_point(|stored| stored.created < a));
    let high = before.map_or(objects.len(), |b| {
        objects.partition_point(|stored| stored.created <= b)
    });
    let selected: &[Stored] = &objects[low..high.max(low)];
    let total = selected.len();
    fn data<'s>(page: &[&'s Stored]) -> Vec<&'s RawValue> {
        page.iter().map(|stored| &*stored.text).collect()
    }
    let number = |name: &str, default: usize| -> Result<usize, String> {
        match params.get(name) {
            None => Ok(default),
            Some(text) => text
                .parse()
                .map_err(|_| format!("{name}={text:?} is not a number")),
        }
    };
    // Where a keyset cursor (`created~id`) leaves off in the selection.
    let after_cursor = |cursor: &str| -> Result<usize, String> {
        let (micros, id) = cursor
            .split_once('~')
            .and_then(|(micros, id)| Some((micros.parse::<i64>().ok()?, id)))
            .ok_or_else(|| format!("cursor {cursor:?} is not a cursor of mine"))?;
        Ok(selected.partition_point(|stored| (stored.created, stored.id.as_str()) <= (micros, id)))
    };
    let keyset = |stored: &&Stored| format!("{}~{}", stored.created, stored.id);
    match style {
        MockPagination::Page | MockPagination::Offset => {
            let (start, mut body) = if style == MockPagination::Page {
                let page = number("page", 1)?;
                if page == 0 {
                    return Err("pages are numbered from 1".into());
                }
                ((page - 1) * limit, json!({ "page": page }))
            } else {
                (number("offset", 0)?, json!({}))
            };
            let ordered: Box<dyn Iterator<Item = &Stored>> = if state.options.newest_first {
                Box::new(selected.iter().rev())
            } else {
                Box::new(selected.iter())
            };
            let page: Vec<_> = ordered.skip(start).take(limit).collect();
            let more = start + page.len() < total;
            let (items, first) = if lose_next {
                (Vec::new(), None)
            } else {
                (data(&page), page.first())
            };
            body["total"] = json!(total);
            body["has_more"] = json!(more);
            Ok(Answer::page(body, "data", &items).served(first))
        }
        MockPagination::Stripe => {
            // Newest first, as Stripe lists.
            let newest: Vec<_> = selected.iter().rev().collect();
            let start = match params.get("starting_after") {
                None => 0,
                // The first page again: the last id repeats.
                Some(_) if repeat_cursor => 0,
                Some(id) => {
                    newest
                        .iter()
                        .position(|stored| &stored.id == id)
                        .ok_or_else(|| format!("No such object: {id:?}"))?
                        + 1
                }
            };
            let page: Vec<_> = newest.iter().skip(start).take(limit).copied().collect();
            let more = start + page.len() < total;
            let (items, more, first) = if lose_next {
                (Vec::new(), true, None)
            } else {
                (data(&page), more, page.first())
            };
            let body = json!({ "object": "list", "url": "/exports", "has_more": more });
            Ok(Answer::page(body, "data", &items).served(first))
        }
        MockPagination::Relay => {
            let opaque = |cursor: &str| base64::engine::general_purpose::STANDARD.encode(cursor);
            let given = params.get("after");
            let start = match given {
                None => 0,
                Some(cursor) => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(cursor)
                        .ok()
                        .and_then(|bytes| String::from_utf8(bytes).ok())
                        .ok_or_else(|| format!("after={cursor:?} is not a cursor of mine"))?;
                    after_cursor(&decoded)?
                }
            };
            let page: Vec<_> = selected.iter().skip(start).take(limit).collect();
            let more = start + page.len() < total;
            let end = if repeat_cursor && given.is_some() {
                given.cloned()
            } else {
                page.last().map(|last| opaque(&keyset(last)))
            };
            let page_info = if lose_next {
                json!({ "hasNextPage": true, "endCursor": null })
            } else {
                json!({ "hasNextPage": more || repeat_cursor, "endCursor": end })
            };
            Ok(Answer::page(
                json!({ "pageInfo": page_info, "totalCount": total }),
                "nodes",
                &data(&page),
            )
            .served(page.first()))
        }
        MockPagination::Cursor | MockPagination::Link | MockPagination::LinkBody => {
            let given = params.get("cursor");
            let start = match given {
                None => 0,
                Some(cursor) => after_cursor(cursor)?,
            };
            let page: Vec<_> = selected.iter().skip(start).take(limit).collect();
            let more = start + page.len() < selected.len();
            let next = if repeat_cursor && given.is_some() {
                given.cloned()
            } else if more {
                page.last().map(keyset)
            } else {
                None
            };
            let with_cursor = |cursor: Option<&str>| {
                let mut target = url.clone();
                let pairs: Vec<(String, String)> = params
                    .iter()
                    .filter(|(name, _)| *name != "cursor")
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect();
                {
                    let mut query = target.query_pairs_mut();
                    query.clear().extend_pairs(pairs);
                    if let Some(cursor) = cursor {
                        query.append_pair("cursor", cursor);
                    }
                }
                target.to_string()
            };
            let next_url = next.as_deref().map(|cursor| with_cursor(Some(cursor)));
            let data = data(&page);
            let first = page.first();
            let answer = match style {
                MockPagination::Cursor => {
                    let mut body = json!({ "has_more": more, "next_cursor": next });
                    if lose_next {
                        body.as_object_mut()
                            .expect("an object")
                            .remove("next_cursor");
                    }
                    Answer::page(body, "data", &data)
                }
                MockPagination::LinkBody => {
                    let links = if lose_next {
                        json!({})
                    } else {
                        json!({ "next": next_url })
                    };
                    Answer::page(json!({ "links": links }), "data", &data)
                }
                _ => {
                    let mut answer = Answer::page(json!({}), "data", &data);
                    if !lose_next {
                        let mut link = format!("<{}>; rel=\"first\"", with_cursor(None));
                        if let Some(next_url) = next_url {
                            link.push_str(&format!(", <{next_url}>; rel=\"next\""));
                        }
                        answer.headers.push(("Link".into(), link));
                    }
                    answer
                }
            };
            Ok(answer.served(first))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_specs() {
        assert_eq!(
            "rate-limit@3=2".parse::<Fault>(),
            Ok(Fault {
                kind: FaultKind::RateLimit {
                    seconds: 2,
                    http_date: false
                },
                trigger: Trigger::At(3)
            })
        );
        assert_eq!(
            "server-error%1".parse::<Fault>().map(|f| f.trigger),
            Ok(Trigger::Every(1))
        );
        assert_eq!(
            "delete@2".parse::<Fault>(),
            Ok(Fault {
                kind: FaultKind::Delete,
                trigger: Trigger::At(2)
            })
        );
        assert_eq!(
            "insert%3".parse::<Fault>().map(|f| f.kind),
            Ok(FaultKind::Insert(1))
        );
        assert_eq!(
            "insert@1=4".parse::<Fault>().map(|f| f.kind),
            Ok(FaultKind::Insert(4))
        );
        assert!("server-error".parse::<Fault>().is_err());
        assert!("nope@1".parse::<Fault>().is_err());
        assert!("drop@0".parse::<Fault>().is_err());
    }

    #[test]
    fn refuses_other_addresses() {
        let options = MockOptions::new(Vec::new(), MockPagination::Page);
        let err = start_on("0.0.0.0:0".parse().unwrap(), options)
            .err()
            .unwrap();
        assert!(err.to_string().contains("loopback"), "{err}");
    }
}
