//! Headless Chromium (Debian's package) for the tests that look at a page as a person would:
//! a screenshot to count coloured pixels in, and the DOM the browser built from the page.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output};

use crate::skip;

pub struct Chromium {
    binary: String,
    /// A fresh profile for every browser: nothing from another run leaks in.
    profile: tempfile::TempDir,
}

/// Flags that let Chromium run headless here: no sandbox (root, no user namespaces), no GPU,
/// and nothing that reaches for the network.
const FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

impl Chromium {
    /// The installed browser, or None (a skip of `what`, see tests/skip.rs). `.ci/run`
    /// installs it.
    pub fn find(what: &str) -> Option<Chromium> {
        let binary = ["chromium", "chromium-browser"]
            .into_iter()
            .map(|name| format!("/usr/bin/{name}"))
            .find(|path| Path::new(path).exists())
            .filter(|_| !skip::without("chromium"));
        let Some(binary) = binary else {
            skip::skipped(what, "no /usr/bin/chromium (Debian's chromium package)");
            return None;
        };
        Some(Chromium {
            binary,
            profile: tempfile::tempdir().unwrap(),
        })
    }

    fn run(&self, extra: &[String]) -> Output {
        Command::new(&self.binary)
            .args(FLAGS)
            .arg(format!("--user-data-dir={}", self.profile.path().display()))
            .args(extra)
            .output()
            .unwrap()
    }

    /// A screenshot of `page` in a window of `width` x `height` CSS pixels, one device pixel
    /// each.
    pub fn screenshot(&self, page: &Path, png: &Path, width: u32, height: u32) {
        let shot = self.run(&[
            format!("--screenshot={}", png.display()),
            format!("--window-size={width},{height}"),
            "--force-device-scale-factor=1".into(),
            format!("file://{}", page.display()),
        ]);
        assert!(
            png.exists(),
            "no screenshot: {}",
            String::from_utf8_lossy(&shot.stderr)
        );
        if let Ok(keep) = std::env::var("ONCEONLY_KEEP_SCREENSHOT") {
            std::fs::copy(png, keep).unwrap();
        }
    }

    /// The document as the browser parsed it (`--dump-dom`).
    pub fn dom(&self, page: &Path) -> String {
        let dump = self.run(&["--dump-dom".into(), format!("file://{}", page.display())]);
        String::from_utf8_lossy(&dump.stdout).into_owned()
    }
}

/// A decoded PNG: `width` x `height` pixels, RGB, row by row.
pub struct Pixels {
    pub width: usize,
    pub height: usize,
    pub rgb: Vec<[u8; 3]>,
}

impl Pixels {
    /// Reads the 8-bit, non-interlaced RGB or RGBA PNG Chromium writes (alpha dropped).
    pub fn read(path: &Path) -> Pixels {
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
        let (mut at, mut header, mut compressed) = (8, None, Vec::new());
        while at + 8 <= bytes.len() {
            let length = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            let kind = &bytes[at + 4..at + 8];
            let data = &bytes[at + 8..at + 8 + length];
            match kind {
                b"IHDR" => header = Some(data.to_vec()),
                b"IDAT" => compressed.extend_from_slice(data),
                b"IEND" => break,
                _ => {}
            }
            at += 12 + length;
        }
        let header = header.expect("an IHDR chunk");
        let width = u32::from_be_bytes(header[0..4].try_into().unwrap()) as usize;
        let height = u32::from_be_bytes(header[4..8].try_into().unwrap()) as usize;
        let (depth, colour, interlace) = (header[8], header[9], header[12]);
        assert_eq!((depth, interlace), (8, 0), "8-bit, not interlaced");
        let channels = match colour {
            2 => 3,
            6 => 4,
            other => panic!("PNG colour type {other}"),
        };
        let mut raw = Vec::new();
        flate2::read::ZlibDecoder::new(&compressed[..])
            .read_to_end(&mut raw)
            .unwrap();
        let stride = width * channels;
        assert_eq!(raw.len(), height * (stride + 1), "the PNG's data size");
        let mut previous = vec![0u8; stride];
        let mut rgb = Vec::with_capacity(width * height);
        for row in raw.chunks(stride + 1) {
            let (filter, line) = (row[0], &row[1..]);
            let mut current = vec![0u8; stride];
            for i in 0..stride {
                let left = if i >= channels {
                    current[i - channels]
                } else {
                    0
                };
                let up = previous[i];
                let up_left = if i >= channels {
                    previous[i - channels]
                } else {
                    0
                };
                let predicted = match filter {
                    0 => 0,
                    1 => left,
                    2 => up,
                    3 => ((u16::from(left) + u16::from(up)) / 2) as u8,
                    4 => paeth(left, up, up_left),
                    other => panic!("PNG filter {other}"),
                };
                current[i] = line[i].wrapping_add(predicted);
            }
            rgb.extend(
                current
                    .chunks(channels)
                    .map(|pixel| [pixel[0], pixel[1], pixel[2]]),
            );
            previous = current;
        }
        Pixels { width, height, rgb }
    }

    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        self.rgb[y * self.width + x]
    }

    /// How many solid `size` x `size` squares of exactly `colour` the image has, each with a
    /// border of other colours around it: the cells of a picture, not a badge or a glyph.
    pub fn squares(&self, colour: [u8; 3], size: usize) -> usize {
        let is = |x: usize, y: usize| x < self.width && y < self.height && self.at(x, y) == colour;
        let mut found = 0;
        for y in 0..self.height.saturating_sub(size - 1) {
            for x in 0..self.width.saturating_sub(size - 1) {
                if !is(x, y) || (x > 0 && is(x - 1, y)) || (y > 0 && is(x, y - 1)) {
                    continue;
                }
                let solid = (y..y + size).all(|yy| (x..x + size).all(|xx| is(xx, yy)));
                let bordered = !is(x + size, y) && !is(x, y + size);
                if solid && bordered {
                    found += 1;
                }
            }
        }
        found
    }
}

fn paeth(a: u8, b: u8, c: u8) -> u8 {
    let p = i16::from(a) + i16::from(b) - i16::from(c);
    let (pa, pb, pc) = (
        (p - i16::from(a)).abs(),
        (p - i16::from(b)).abs(),
        (p - i16::from(c)).abs(),
    );
    if pa <= pb && pa <= pc {
        a
    } else if pb <= pc {
        b
    } else {
        c
    }
}

/// `#rrggbb` as bytes.
pub fn rgb(hex: &str) -> [u8; 3] {
    let byte = |at: usize| u8::from_str_radix(&hex[at..at + 2], 16).unwrap();
    [byte(1), byte(3), byte(5)]
}
