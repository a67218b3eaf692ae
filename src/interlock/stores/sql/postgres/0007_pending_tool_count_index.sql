-- Version 7 of PostgresStore's schema: an index for the inbox counted per tool.
-- Released: never edit a statement here (see interlock.stores._postgres_schema).

-- interrupts_pending_tool_count --
-- The inbox counted per tool (`Store.pending_counts`) reads every pending row's tool: an
-- index of the tool alone, which B-tree deduplication keeps to a few bytes per row, lets that
-- be an index-only scan of a tenth of what (tool, created_at, ord) holds.
CREATE INDEX interrupts_pending_tool_count ON interrupts (tool) WHERE status = 'pending';
