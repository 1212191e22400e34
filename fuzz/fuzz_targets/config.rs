//! `onceonly.toml`: any text is a config or an error naming the file, never a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use onceonly::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::parse(text, Path::new("/fuzz/onceonly.toml")) {
        Ok(config) => {
            assert!(!config.operations.is_empty());
            for operation in &config.operations {
                let _ = config.operation_for(&operation.dag_id, &operation.task_id);
            }
        }
        Err(err) => {
            let message = err.to_string();
            assert!(message.contains("/fuzz/onceonly.toml"), "{message}");
        }
    }
});
