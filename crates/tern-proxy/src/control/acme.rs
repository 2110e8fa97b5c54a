//! The ACME certificates of the running configuration: a slot and a
//! renewal task per certificate, kept across reloads (a reload that keeps
//! a certificate keeps its task, its slot and what it serves).

use std::sync::Arc;

use tern_acme::{Acme, AcmeSettings, CertSpec, Challenges, Managed};

use crate::error::ServeError;

struct Entry {
    settings: AcmeSettings,
    managed: Managed,
    task: Option<tokio::task::AbortHandle>,
}

/// Every ACME certificate tern keeps, by CA settings and spec.
#[derive(Default)]
pub(crate) struct AcmeRegistry {
    /// Challenge answers, shared by all certificates and listeners.
    challenges: Challenges,
    cas: Vec<Arc<Acme>>,
    entries: Vec<Entry>,
}

impl AcmeRegistry {
    /// The slots for `specs`, made (from the state directory or as
    /// placeholders) for specs not kept yet. Tasks start in
    /// [`AcmeRegistry::start_and_retain`].
    pub(crate) fn managed_for(
        &mut self,
        settings: &AcmeSettings,
        specs: &[CertSpec],
    ) -> Result<Vec<Managed>, ServeError> {
        let mut out = Vec::with_capacity(specs.len());
        for spec in specs {
            if let Some(e) = self
                .entries
                .iter()
                .find(|e| &e.settings == settings && &e.managed.spec == spec)
            {
                out.push(e.managed.clone());
                continue;
            }
            let ca = self.ca(settings)?;
            let managed = ca.prepare(spec.clone())?;
            self.entries.push(Entry {
                settings: settings.clone(),
                managed: managed.clone(),
                task: None,
            });
            out.push(managed);
        }
        Ok(out)
    }

    fn ca(&mut self, settings: &AcmeSettings) -> Result<Arc<Acme>, ServeError> {
        if let Some(ca) = self.cas.iter().find(|c| c.settings() == settings) {
            return Ok(ca.clone());
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let ca = Acme::new(settings.clone(), self.challenges.clone(), provider)?;
        self.cas.push(ca.clone());
        Ok(ca)
    }

    /// Where challenge answers are published.
    pub(crate) fn challenges(&self) -> &Challenges {
        &self.challenges
    }

    /// Starts the renewal tasks not running yet (on the current runtime)
    /// and stops those of certificates `config` no longer names.
    pub(crate) fn start_and_retain(&mut self, config: &crate::config::Config) {
        let used = |e: &Entry| {
            config.acme.as_ref() == Some(&e.settings)
                && config
                    .listeners
                    .iter()
                    .any(|l| l.acme.contains(&e.managed.spec))
        };
        self.entries.retain(|e| {
            let keep = used(e);
            if !keep {
                if let Some(task) = &e.task {
                    task.abort();
                }
                tracing::info!("ACME {}: no longer configured", e.managed.spec.label());
            }
            keep
        });
        self.cas
            .retain(|ca| self.entries.iter().any(|e| &e.settings == ca.settings()));
        for e in &mut self.entries {
            if e.task.is_none() {
                let Some(ca) = self.cas.iter().find(|c| c.settings() == &e.settings) else {
                    continue;
                };
                let task = tokio::spawn(ca.clone().run(e.managed.clone()));
                e.task = Some(task.abort_handle());
            }
        }
    }
}
