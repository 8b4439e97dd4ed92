DROP INDEX analyses_purge_idx;
