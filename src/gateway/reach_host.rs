//! The gateway as the agent's reach sees it ([`Host`]): the handles of the stages its
//! tools act on, taken at each call.

use std::sync::Arc;

use super::Core;
use crate::reach::{Handles, Host};

impl Host for Core {
    fn handles(self: Arc<Self>) -> Handles {
        Handles {
            config: self.config.clone(),
            store: self.store.clone(),
            agents: self.agents.clone(),
            acp: self.acp.clone(),
            placement: self.placement.clone(),
            intake: self.intake.clone(),
            notices: self.notices.clone(),
            cron_wake: self.cron_wake.clone(),
            commands: Arc::new(self.commands()),
        }
    }
}
