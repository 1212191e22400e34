//! `audit --format html` / `--html FILE`: the nightly report a person opens in a browser. Its
//! counts agree with the JSON report of the same audit, its picture has one cell per interval in
//! the colour of the interval's worst finding (as the browser draws it, counted in a
//! screenshot), hostile strings stay text, and the same inputs give the same bytes.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::chromium::{Chromium, Pixels, rgb};
use crate::scenario::{Scenario, onceonly, stderr, stdout, synthesized};

fn real_run() -> Scenario {
    Scenario::copy_of("airflow/out/airflow-3.3.2")
}

/// The value of `attribute` in the first element whose opening tag has `marker`.
fn attribute<'a>(html: &'a str, marker: &str, attribute: &str) -> Option<&'a str> {
    let tag_start = html.find(marker)?;
    let tag = &html[tag_start..tag_start + html[tag_start..].find('>')?];
    let start = tag.find(&format!("{attribute}=\""))? + attribute.len() + 2;
    Some(&tag[start..start + tag[start..].find('"')?])
}

/// The text between the opening tag that has `marker` and the next `<`.
fn text_after<'a>(html: &'a str, marker: &str) -> Option<&'a str> {
    let at = html.find(marker)?;
    let start = at + html[at..].find('>')? + 1;
    Some(&html[start..start + html[start..].find('<')?])
}

fn cells_of(html: &str, class: &str) -> usize {
    html.matches(&format!("<rect class=\"cell {class}\""))
        .count()
}

const CLASSES: [&str; 8] = [
    "error",
    "warning",
    "info",
    "bad-verdict",
    "unfinished",
    "no-effect",
    "recovered",
    "fine",
];

#[test]
fn the_page_counts_what_the_json_report_counts_and_colours_each_interval_by_its_worst_finding() {
    let scenario = real_run();
    let path = |name: &str| scenario.path(name).to_str().unwrap().to_string();
    let output = scenario.audit(&[
        "--format",
        "json",
        "--output",
        &path("report.json"),
        "--verdicts",
        &path("verdicts.ndjson"),
        "--html",
        &path("report.html"),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&scenario.read("report.json")).unwrap();
    let page = scenario.read("report.html");

    // The same page from --format html, and from a second run: deterministic bytes.
    let again = scenario.audit(&["--format", "html"]);
    assert_eq!(stdout(&again), page, "--format html and --html FILE differ");
    assert_eq!(
        stdout(&scenario.audit(&["--format", "html"])),
        page,
        "two runs over the same inputs gave different pages"
    );

    // What the picture must show, from the JSON report and the verdict file: one cell per
    // (dag, interval) a try or a finding has, coloured by the worst finding's severity.
    let mut worst: BTreeMap<(String, String), &str> = BTreeMap::new();
    let rank = |severity: &str| {
        ["info", "warning", "error"]
            .iter()
            .position(|s| *s == severity)
    };
    for finding in report["findings"].as_array().unwrap() {
        let key = (
            finding["dag_id"].as_str().unwrap().to_string(),
            finding["interval"].as_str().unwrap().to_string(),
        );
        let severity = finding["severity"].as_str().unwrap();
        let entry = worst.entry(key).or_insert(severity);
        if rank(severity) > rank(entry) {
            *entry = severity;
        }
    }
    let mut intervals: BTreeSet<(String, String)> = worst.keys().cloned().collect();
    for line in scenario.read("verdicts.ndjson").lines() {
        let verdict: Value = serde_json::from_str(line).unwrap();
        intervals.insert((
            verdict["dag_id"].as_str().unwrap().to_string(),
            verdict["interval"].as_str().unwrap().to_string(),
        ));
    }
    let expected = |severity: &str| worst.values().filter(|s| **s == severity).count();
    assert_eq!(
        (expected("error"), expected("warning"), expected("info")),
        (4, 2, 1),
        "the fixture's findings changed: {worst:?}"
    );

    let [first_day, ..] = crate::scenario::airflow_days("airflow-3.3.2");
    let check = |html: &str, source: &str| {
        let total: usize = CLASSES.iter().map(|class| cells_of(html, class)).sum();
        assert_eq!(total, intervals.len(), "{source}: one cell per interval");
        for severity in ["error", "warning", "info"] {
            assert_eq!(
                cells_of(html, severity),
                expected(severity),
                "{source}: {severity} cells"
            );
        }
        for class in CLASSES {
            assert_eq!(
                attribute(html, &format!("class=\"key {class}\""), "data-cells")
                    .and_then(|n| n.parse().ok()),
                Some(cells_of(html, class)),
                "{source}: the legend's count of {class} cells"
            );
        }
        // onceonly_a's first interval lost a response that the retry got back: no finding,
        // and not a clean commit either.
        let recovered = html
            .split("<rect class=\"cell recovered\"")
            .nth(1)
            .expect("a recovered cell");
        assert!(
            recovered[..recovered.find("</title>").unwrap()].contains(&format!(
                "{first_day}T00:00:00Z | tries: lost-response 1, reconciled 1"
            )),
            "{source}: {recovered}"
        );
        // The counts the JSON report has.
        assert_eq!(
            text_after(html, "id=\"findings-total\""),
            Some(report["summary"]["findings"].to_string().as_str())
        );
        for (code, n) in report["summary"]["by_rule"].as_object().unwrap() {
            let row = &html[html.find(&format!("<tr data-rule=\"{code}\">")).unwrap()..];
            assert_eq!(
                text_after(row, "class=\"count\""),
                Some(n.to_string().as_str()),
                "{source}: {code}"
            );
        }
        for (severity, n) in report["summary"]["by_severity"].as_object().unwrap() {
            assert_eq!(
                attribute(html, &format!("data-severity=\"{severity}\""), "data-count"),
                Some(n.to_string().as_str())
            );
        }
        for (verdict, n) in report["summary"]["verdicts"].as_object().unwrap() {
            let row = &html[html
                .find(&format!("<tr data-verdict=\"{verdict}\">"))
                .unwrap()..];
            assert_eq!(
                text_after(row, "class=\"count\""),
                Some(n.to_string().as_str())
            );
        }
        // Each DAG's findings under it, each rule's with its explanation.
        let mut by_dag: BTreeMap<&str, usize> = BTreeMap::new();
        for finding in report["findings"].as_array().unwrap() {
            *by_dag
                .entry(finding["dag_id"].as_str().unwrap())
                .or_default() += 1;
        }
        for (dag, n) in by_dag {
            let section = &html[html.find("class=\"dag\" id=").unwrap()..];
            let section = &section[section.find(&format!("data-dag=\"{dag}\"")).unwrap()..];
            let section = &section[..section.find("</section>").unwrap()];
            assert_eq!(
                text_after(section, "class=\"dag-findings\""),
                Some(n.to_string().as_str()),
                "{source}: findings of {dag}"
            );
            assert_eq!(
                section.matches("<tr class=\"finding ").count(),
                n,
                "{source}: rows of {dag}"
            );
            assert!(
                section.contains("<b>What it detects</b>") && section.contains("<b>Repair</b>")
            );
        }
    };
    check(&page, "the page as written");

    let Some(chromium) = Chromium::find("the HTML report's rendering") else {
        return;
    };
    let file = scenario.path("report.html");
    let dom = chromium.dom(&file);
    assert!(dom.contains("<h1>onceonly audit</h1>"), "{dom}");
    check(&dom, "the DOM Chromium built");

    // The picture as drawn: a 16 x 16 square of each cell's colour per cell.
    let png = scenario.path("report.png");
    chromium.screenshot(&file, &png, 1200, 2000);
    let pixels = Pixels::read(&png);
    for class in CLASSES {
        let cells = cells_of(&dom, class);
        if cells == 0 {
            continue;
        }
        let colour = attribute(&dom, &format!("<rect class=\"cell {class}\""), "fill").unwrap();
        assert_eq!(
            pixels.squares(rgb(colour), 16),
            cells,
            "{class} cells ({colour}) in the screenshot"
        );
    }
}

#[test]
fn the_page_marks_what_is_new_persisting_and_resolved_against_the_baseline() {
    let scenario = real_run();
    let earlier = scenario.path("earlier.json");
    let output = scenario.audit(&["--format", "json", "--output", earlier.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    // Overnight the duplicate D001 found was voided: its findings are resolved, the rest
    // persist.
    let earlier_report: Value = serde_json::from_str(&scenario.read("earlier.json")).unwrap();
    let duplicate = earlier_report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|finding| finding["code"] == "D001")
        .expect("a D001 finding");
    let voided = duplicate["evidence"]["external_ids"][1].as_str().unwrap();
    let provider: String = scenario
        .read("provider.ndjson")
        .lines()
        .map(|line| {
            let mut object: Value = serde_json::from_str(line).unwrap();
            if object["external_id"] == voided {
                // The fixture's `void_statuses`.
                object["status"] = "cancelled".into();
            }
            format!("{object}\n")
        })
        .collect();
    scenario.write("provider.ndjson", &provider);
    let page = scenario.path("tonight.html");
    let tonight = scenario.audit(&[
        "--baseline",
        earlier.to_str().unwrap(),
        "--format",
        "json",
        "--html",
        page.to_str().unwrap(),
    ]);
    let report: Value = serde_json::from_str(&stdout(&tonight)).unwrap();
    let html = scenario.read("tonight.html");
    let baseline = &report["baseline"];
    assert!(!baseline["resolved"].as_array().unwrap().is_empty());
    for (id, n) in [
        ("new", baseline["new"].to_string()),
        ("persisting", baseline["persisting"].to_string()),
        (
            "resolved",
            baseline["resolved"].as_array().unwrap().len().to_string(),
        ),
    ] {
        assert_eq!(
            text_after(&html, &format!("id=\"{id}\"")),
            Some(n.as_str()),
            "{id}"
        );
    }
    for mark in ["new", "persisting"] {
        assert_eq!(
            html.matches(&format!("<td class=\"{mark}\">{mark}</td>"))
                .count(),
            report["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|finding| finding["baseline"] == mark)
                .count(),
            "{mark}"
        );
    }
    let resolved = &html[html.find("<table class=\"resolved\">").unwrap()..];
    let resolved = &resolved[..resolved.find("</table>").unwrap()];
    assert_eq!(
        resolved.matches("<tr><td>").count(),
        baseline["resolved"].as_array().unwrap().len()
    );
}

#[test]
fn hostile_strings_stay_text_and_the_page_loads_nothing() {
    let hostile = crate::trace::HOSTILE_HTML;
    let (scenario, key, _) = crate::plan::hostile_lost_response(false);
    let object = serde_json::json!({
        "external_id": hostile, "op_key": key, "created_at": "2026-11-02T00:05:30Z", "status": "succeeded",
    });
    scenario.write("provider.ndjson", &format!("{object}\n"));
    // An earlier report anyone could have edited, its resolved finding hostile too.
    let earlier = serde_json::json!({"findings": [{
        "id": "D001-0", "code": hostile, "dag_id": hostile, "interval": hostile, "message": hostile,
    }]});
    scenario.write("earlier.json", &earlier.to_string());
    let earlier = scenario.path("earlier.json");
    let output = scenario.audit(&["--format", "html", "--baseline", earlier.to_str().unwrap()]);
    let output = match output.status.code() {
        Some(1) => output,
        _ => panic!("{}", stderr(&output)),
    };
    let page = stdout(&output);
    scenario.write("report.html", &page);
    assert!(
        !page.contains("<img") && !page.contains("<script"),
        "a hostile string became markup"
    );
    assert!(
        page.matches("&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;&lt;script&gt;")
            .count()
            >= 5,
        "the hostile id is shown as text in the picture, the findings and the resolved list"
    );
    for external in [
        "src=\"",
        "href=\"http",
        "<link",
        "@import",
        "url(",
        "<iframe",
        "<object",
    ] {
        assert!(
            !page.contains(external),
            "the page loads something: {external}"
        );
    }
    assert!(page.contains("content=\"default-src 'none'; style-src 'unsafe-inline'\""));
    // A rule that could not run is said so at the top.
    scenario.edit("onceonly.toml", "key_ttl = \"24h\"", "");
    let page = stdout(&scenario.audit(&["--format", "html"]));
    assert_eq!(
        attribute(&page, "class=\"skipped\"", "data-rule"),
        Some("T001")
    );

    let Some(chromium) = Chromium::find("the hostile HTML report's rendering") else {
        return;
    };
    let dom = chromium.dom(&scenario.path("report.html"));
    assert!(dom.contains("onceonly audit"), "{dom}");
    assert!(
        !dom.contains("<img") && !dom.contains("<script"),
        "the injected element exists in the rendered page"
    );
}

#[test]
fn a_dag_of_thousands_of_intervals_stays_one_bounded_picture() {
    // Duplicates, and lost responses a later try settled (the lost object voided, a new one
    // committed): no finding there, and nothing to alarm anyone.
    let (_dir, out) = synthesized("2500", "1", "3", "D001=0.01,voided=0.03,retry=0.03");
    let out = out.as_str();
    let audited = onceonly(&[
        "audit",
        "--from-snapshot",
        out,
        "--config",
        &format!("{out}/onceonly.toml"),
        "--format",
        "html",
    ]);
    assert_eq!(audited.status.code(), Some(1), "{}", stderr(&audited));
    let page = stdout(&audited);
    let cells: usize = CLASSES.iter().map(|class| cells_of(&page, class)).sum();
    assert_eq!(
        cells,
        2500usize.div_ceil(3),
        "each cell stands for three intervals"
    );
    assert!(page.contains("each cell stands for 3 consecutive intervals"));
    assert!(
        cells_of(&page, "error") > 0,
        "the duplicates are still seen"
    );
}
