-- placeholder, replaced before first landing
SELECT 1;
