"""kvsim.engine.fleet: replica pools, roles, routers, the views routers see, and the P/D hand-off."""
