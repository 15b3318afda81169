//! The remote watches of one supervised task: a [`crate::io::remote::watch`] per host that
//! runs one of the task's agents, started and stopped as agents come and go, all
//! feeding one channel the task's actor selects on.

use std::collections::HashMap;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::core::model::RemoteSpec;
use crate::store::task::Task;

/// The watches of one task; dropping it stops them all (and their ssh clients).
pub struct Watches {
    running: HashMap<RemoteSpec, JoinHandle<()>>,
    tx: mpsc::Sender<RemoteSpec>,
    rx: mpsc::Receiver<RemoteSpec>,
}

impl Default for Watches {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel(16);
        Watches {
            running: HashMap::new(),
            tx,
            rx,
        }
    }
}

impl Watches {
    /// Watch exactly the hosts where `task` has a running agent.
    pub fn refresh(&mut self, task: &Task) {
        let wanted = crate::app::session::watched_hosts(task);
        self.running.retain(|spec, handle| {
            let keep = wanted.contains(spec) && !handle.is_finished();
            if !keep {
                handle.abort();
            }
            keep
        });
        for spec in wanted {
            if !self.running.contains_key(&spec) {
                let run = crate::io::remote::watch::run(spec.clone(), task.name.to_string(), self.tx.clone());
                self.running.insert(spec, tokio::spawn(run));
            }
        }
    }

    /// Wait for a change on any watched host; a burst of changes comes back as one, naming
    /// each host that changed once.
    pub async fn changed(&mut self) -> Vec<RemoteSpec> {
        let mut hosts = Vec::new();
        if let Some(h) = self.rx.recv().await {
            hosts.push(h);
            while let Ok(h) = self.rx.try_recv() {
                if !hosts.contains(&h) {
                    hosts.push(h);
                }
            }
        }
        hosts
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for handle in self.running.values() {
            handle.abort();
        }
    }
}
