//! One plugin file to a loaded [`Tool`], the safe way (docs/security.md): open the file only if
//! nobody but the server's user or root could have written it (`trust`), stream the bytes from
//! that descriptor into a private copy while hashing them, check the copy's ELF is complete,
//! load it under its content hash (never the file itself, which may be replaced in place), then
//! read and check the manifest. The bytes are never held in memory as a whole: buffers of a
//! plugin's size (9 MB release, 20 MB debug), freed at start, stayed in the allocator's heap
//! and were most of an idle server's memory.
//!
//! Loaded libraries are never unloaded (abi_stable leaks them), so each content hash is loaded
//! at most once and failures are remembered too: retrying a bad file costs nothing.

use std::{
    collections::HashMap,
    fmt,
    fs::File,
    io::{Read, Write},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use abi_stable::std_types::RString;
use rojos_llm::ToolDefinition;
use rojos_plugin_api::{Manifest, ToolModuleRef, JSON_API};
use rojos_plugin_worker::{
    module::{self, host_api_version, ModuleError},
    probe::{self, ProbeError},
    protocol::Refusal,
    WorkerPool,
};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

pub use super::load_error::{LoadError, LoadFailure, MAX_PLUGIN_BYTES};
use super::{
    copies, elf,
    isolation::{Isolation, WorkerSettings, WorkerStart},
    trust::{self, PathIoError, Refusal as Untrusted},
};

/// A loaded library: one per distinct file content, never unloaded.
pub struct Library {
    /// SHA-256 of the file, hex.
    pub hash: String,
    /// What the plugin says about itself.
    pub manifest: Manifest,
    /// The arguments validator compiled from the manifest's parameters.
    pub(crate) validator: jsonschema::Validator,
    /// The OpenAI function definition offered to models.
    pub definition: Value,
    /// `definition` as every model request sends it, sanitised once here.
    pub offered: ToolDefinition,
    /// Where its code runs.
    pub(crate) runner: Runner,
}

/// Where a library's code runs.
pub(crate) enum Runner {
    /// Opened in the server's own process.
    InProcess(ToolModuleRef),
    /// Opened only by its workers, one per project it is called on.
    Worker(Arc<WorkerPool>),
}

impl Library {
    /// Whether its calls run in worker processes.
    pub fn isolated(&self) -> bool {
        matches!(self.runner, Runner::Worker(_))
    }

    /// Why it is quarantined (its workers kept dying), if it is: it is then not offered to
    /// models and its calls are refused (docs/plugins.md, "Quarantine").
    pub fn quarantined(&self) -> Option<String> {
        match &self.runner {
            Runner::InProcess(_) => None,
            Runner::Worker(pool) => pool.quarantined(),
        }
    }
}

impl fmt::Debug for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Library")
            .field("hash", &self.hash)
            .field("tool", &self.manifest.spec.name)
            .finish_non_exhaustive()
    }
}

/// A tool as the registry holds it: a library, where it came from, and its call limiter.
#[derive(Debug)]
pub struct Tool {
    /// The plugin file it was loaded from.
    pub source: PathBuf,
    /// The loaded code.
    pub library: Arc<Library>,
    /// Caps how many calls of this tool run at once (a hung call keeps its permit).
    pub(crate) limiter: Arc<Semaphore>,
}

impl Tool {
    /// The model-facing name.
    pub fn name(&self) -> &str {
        &self.library.manifest.spec.name
    }
}

/// What loading one content (as one isolation) gave.
type Loaded = Result<Arc<Library>, LoadFailure>;

/// Loads plugin files, remembering every content hash it has seen.
#[derive(Debug)]
pub struct Loader {
    cache: tempfile::TempDir,
    seen: Mutex<HashMap<(String, Isolation), Loaded>>,
    max_concurrent_calls: usize,
    workers: Mutex<WorkerSettings>,
}

impl Loader {
    /// A loader whose private copies live in a fresh `0700` temp folder (stale ones of dead
    /// processes are removed first: see `copies`).
    ///
    /// # Errors
    ///
    /// The temp folder cannot be created.
    pub fn new(max_concurrent_calls: usize) -> std::io::Result<Loader> {
        let cache = copies::fresh_folder(&std::env::temp_dir())?;
        Ok(Loader {
            cache,
            seen: Mutex::new(HashMap::new()),
            max_concurrent_calls,
            workers: Mutex::new(WorkerSettings::default()),
        })
    }

    /// The binary started as `PROGRAM plugin-worker` for workers (default: this process's
    /// own executable; the tests, whose executable is not `rojos`, name the built binary).
    #[must_use]
    pub fn with_worker_program(self, program: impl Into<PathBuf>) -> Loader {
        {
            let mut workers = lock(&self.workers);
            let start = if workers.zygote.is_some() {
                WorkerStart::Zygote
            } else {
                WorkerStart::Exec
            };
            workers.set_start(program.into(), start);
        }
        self
    }

    /// Starts workers as `start` says (default: forked by a zygote).
    #[must_use]
    pub fn with_worker_start(self, start: WorkerStart) -> Loader {
        {
            let mut workers = lock(&self.workers);
            let program = workers.program.clone();
            workers.set_start(program, start);
        }
        self
    }

    /// Sets the sandbox, limits, idle time, start and quarantine rule of the workers of
    /// libraries loaded from now on (`[plugins]` in the config); the worker program is kept.
    pub fn configure_workers(
        &self,
        sandbox: rojos_plugin_worker::SandboxSettings,
        idle: std::time::Duration,
        start: WorkerStart,
        quarantine: Option<rojos_plugin_worker::QuarantineRule>,
        records: Option<PathBuf>,
    ) {
        if rojos_plugin_worker::sandbox::identity::is_root() {
            match sandbox.user {
                Some(user) => tracing::info!("plugin workers run as the owner of their project's root folder, or as uid {} gid {} ([plugins].worker_user) when root owns it", user.uid, user.gid),
                None => tracing::info!("plugin workers run as the owner of their project's root folder; when root owns it they stay root with every capability dropped (set [plugins].worker_user to run them as another user)"),
            }
        }
        let mut workers = lock(&self.workers);
        workers.sandbox = sandbox;
        workers.idle = idle;
        workers.quarantine = quarantine;
        workers.records = records;
        let program = workers.program.clone();
        workers.set_start(program, start);
    }

    /// Loads the plugin at `path` to run in the server's process.
    ///
    /// # Errors
    ///
    /// [`LoadError`] naming `path` and what is wrong with it.
    pub fn load(&self, path: &Path) -> Result<Arc<Tool>, LoadError> {
        self.load_as(path, Isolation::InProcess)
    }

    /// Loads the plugin at `path` to run as `isolation` says: in a worker, the library is
    /// never opened in the server (its manifest is read by a sandboxed worker).
    ///
    /// # Errors
    ///
    /// [`LoadError`] naming `path` and what is wrong with it.
    pub fn load_as(&self, path: &Path, isolation: Isolation) -> Result<Arc<Tool>, LoadError> {
        let _span = tracing::info_span!("plugin_load", path = %path.display()).entered();
        let error = |reason| LoadError {
            path: path.to_owned(),
            reason,
        };
        let source = open_trusted(path).map_err(error)?;
        let staged = self.stage(source, path).map_err(error)?;
        let library = self.library_for(staged, isolation).map_err(error)?;
        Ok(Arc::new(Tool {
            source: path.to_owned(),
            library,
            limiter: Arc::new(Semaphore::new(self.max_concurrent_calls)),
        }))
    }

    /// Copies the plugin's bytes from `source` into a new file of the copy folder, hashing
    /// them on the way, in buffers of 64 KiB.
    fn stage(&self, source: File, path: &Path) -> Result<Staged, LoadFailure> {
        let copy_failed = |e| LoadFailure::Copy(Arc::new(e));
        let mut copy = tempfile::NamedTempFile::new_in(self.cache.path()).map_err(copy_failed)?;
        // Readable by a worker that runs as its project's owner: it opens the copy again
        // through the descriptor it opened as root (docs/security.md); the copy folder stays
        // 0700, so nobody else reaches it by its path.
        copy.as_file()
            .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .map_err(copy_failed)?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 64 << 10];
        // Still capped: the file may grow while it is read.
        let mut source = source.take(MAX_PLUGIN_BYTES + 1);
        let mut len = 0u64;
        loop {
            let n = match source.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(LoadFailure::Read(PathIoError::new(path, e))),
            };
            len += n as u64;
            if len > MAX_PLUGIN_BYTES {
                return Err(LoadFailure::TooLarge);
            }
            hasher.update(&buffer[..n]);
            copy.write_all(&buffer[..n]).map_err(copy_failed)?;
        }
        Ok(Staged {
            hash: hex::encode(hasher.finalize()),
            copy,
        })
    }

    fn library_for(
        &self,
        staged: Staged,
        isolation: Isolation,
    ) -> Result<Arc<Library>, LoadFailure> {
        // One load at a time: dlopen runs the library's constructors, and two loads of the
        // same new content must not both copy and open it.
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = (staged.hash.clone(), isolation);
        if let Some(known) = seen.get(&key) {
            // Known content: the staged copy is removed when dropped.
            return known.clone();
        }
        let result = self.load_new(staged, isolation).map(Arc::new);
        seen.insert(key, result.clone());
        result
    }

    fn load_new(&self, staged: Staged, isolation: Isolation) -> Result<Library, LoadFailure> {
        elf::check_complete(&object::ReadCache::new(staged.copy.as_file()))?;
        let hash = staged.hash;
        let copy = self.cache.path().join(format!("{hash}.so"));
        if !copy.exists() {
            staged
                .copy
                .persist(&copy)
                .map_err(|e| LoadFailure::Copy(Arc::new(e.error)))?;
        }
        let (manifest, runner) = match isolation {
            Isolation::InProcess => {
                let module = module::open(&copy).map_err(LoadFailure::from)?;
                (
                    read_manifest(
                        module.manifest()()
                            .into_result()
                            .map(RString::into_string)
                            .map_err(RString::into_string),
                    )?,
                    Runner::InProcess(module),
                )
            }
            Isolation::Worker => self.probe(copy)?,
        };
        let validator = jsonschema::validator_for(&manifest.spec.parameters)
            .map_err(|e| LoadFailure::InvalidSchema(Arc::new(e.to_owned())))?;
        tracing::info!(tool = %manifest.spec.name, hash = %&hash[..12], "plugin loaded");
        let definition = super::definition::definition(&manifest);
        let offered = ToolDefinition::new(&definition)
            .map_err(|e| LoadFailure::BadManifest(e.to_string()))?;
        Ok(Library {
            definition,
            offered,
            hash,
            manifest,
            validator,
            runner,
        })
    }

    /// Reads the manifest of the library at `copy` in a worker, and makes its worker pool.
    fn probe(&self, copy: PathBuf) -> Result<(Manifest, Runner), LoadFailure> {
        let settings = lock(&self.workers).clone();
        let probed = probe::manifest(
            &settings.program,
            settings.zygote.as_deref(),
            &copy,
            settings.sandbox,
            settings.start_timeout,
        )
        .map_err(|e| match e {
            ProbeError::Refused(Refusal::Module(module)) => LoadFailure::from(module),
            ProbeError::Refused(Refusal::Sandbox(why)) => LoadFailure::Sandbox(why),
            other => LoadFailure::Worker(other.to_string()),
        })?;
        if !probed.missing.is_empty() {
            tracing::warn!(missing = %probed.missing.join(", "), "plugin workers run without part of their sandbox on this kernel ([plugins].sandbox = \"best-effort\")");
        }
        let manifest = read_manifest(probed.manifest)?;
        let pool = WorkerPool::new(settings.pool(copy, &manifest.spec.name));
        Ok((manifest, Runner::Worker(pool)))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A plugin's bytes copied into the copy folder under a temporary name, and their hash.
struct Staged {
    /// SHA-256 of the bytes, in hex: the copy's final name and the load cache's key.
    hash: String,
    /// The copy; removed when dropped unless it was persisted under its hash.
    copy: tempfile::NamedTempFile,
}

/// The plugin file, opened only if its owner and mode were checked, and not over
/// [`MAX_PLUGIN_BYTES`] by its size.
fn open_trusted(path: &Path) -> Result<File, LoadFailure> {
    let file = trust::open_library(path).map_err(|refusal| match refusal {
        Untrusted::Io(error) => LoadFailure::Read(error),
        Untrusted::Untrusted(distrust) => LoadFailure::Untrusted(distrust),
    })?;
    if file
        .metadata()
        .is_ok_and(|meta| meta.len() > MAX_PLUGIN_BYTES)
    {
        return Err(LoadFailure::TooLarge);
    }
    Ok(file)
}

/// Checks the manifest a plugin gave (or the error it gave instead).
fn read_manifest(given: Result<String, String>) -> Result<Manifest, LoadFailure> {
    let json = given.map_err(|e| LoadFailure::BadManifest(format!("manifest failed: {e}")))?;
    let manifest: Manifest =
        serde_json::from_str(&json).map_err(|e| LoadFailure::InvalidManifest(Arc::new(e)))?;
    let name = &manifest.spec.name;
    // A name every provider accepts; the loader's message names the rule as a pattern.
    if rojos_llm::validate_tool_name(name).is_err() {
        return Err(LoadFailure::BadManifest(format!(
            "tool name {name:?} is not allowed: use ^[a-zA-Z][a-zA-Z0-9_-]{{0,63}}$"
        )));
    }
    if manifest.api != JSON_API {
        return Err(LoadFailure::Module(ModuleError::Version {
            found: format!(
                "{} (JSON api {})",
                manifest.plugin_api_version, manifest.api
            ),
            expected: format!("{} (JSON api {JSON_API})", host_api_version()),
        }));
    }
    if !manifest.panic_unwind {
        return Err(LoadFailure::BadManifest(
            "built with panic = \"abort\": a panic would kill the server; build with panic = \"unwind\"".to_owned(),
        ));
    }
    if manifest.spec.parameters.get("type") != Some(&Value::from("object")) {
        return Err(LoadFailure::BadManifest(
            "parameters must be a JSON schema of type \"object\"".to_owned(),
        ));
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_keeps_the_system_error_as_the_source() {
        let dir = tempfile::tempdir().unwrap();
        let error = Loader::new(1)
            .unwrap()
            .load(&dir.path().join("libnone.so"))
            .unwrap_err();
        let mut source: Option<&dyn std::error::Error> = Some(&error);
        let mut io = None;
        while let Some(e) = source {
            io = io.or(e.downcast_ref::<std::io::Error>());
            source = e.source();
        }
        assert_eq!(
            io.map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound),
            "{error}"
        );
        assert!(error.to_string().contains("cannot read"), "{error}");
    }

    #[test]
    fn a_file_over_the_size_cap_is_refused_naming_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libhuge.so");
        // Sparse: no disk space is used, and reading it would take 256 MiB of memory.
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(MAX_PLUGIN_BYTES + 1).unwrap();
        let error = Loader::new(1).unwrap().load(&path).unwrap_err();
        assert!(matches!(error.reason, LoadFailure::TooLarge), "{error}");
        assert!(
            error
                .to_string()
                .ends_with("larger than the 256 MiB a plugin may have"),
            "{error}"
        );
    }
}
