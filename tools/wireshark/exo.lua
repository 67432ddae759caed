-- Wireshark dissector for Exo frames (EtherType 0x88B5), layout v1.
--
-- The layout is docs/wire.md; its one source is hw/wire.json. The block
-- between the BEGIN/END markers below is generated from hw/wire.json by
-- `go test ./tools/wireshark -update` and checked by `go test
-- ./tools/wireshark` (it fails when hw/wire.json and this file drift).
--
-- Load it:
--   wireshark -X lua_script:tools/wireshark/exo.lua capture.pcap
--   tshark -X lua_script:tools/wireshark/exo.lua -r capture.pcap -V
-- or copy it to ~/.local/lib/wireshark/plugins/ (docs/frames.md).
--
-- Every field of the fixed header is decoded (exo.version .. exo.tag),
-- the history ids (X for 0xFF, none), each payload record (length and
-- bytes); the Ethernet padding after 32 + hist_len + payload_len bytes is
-- left to Wireshark (eth.padding), never decoded as payload. A frame the
-- Go codec rejects gets exo.reason (its reason code, in the codec's order
-- of checks, exo/frame.go) and an expert info for every problem found.

-- BEGIN wire constants (generated from hw/wire.json: go test ./tools/wireshark -update)
local WIRE = {
	ether_type = 0x88B5,
	eth_header_len = 14,
	min_eth_frame = 60,
	version = 1,
	type_data = 1,
	header_len = 32,
	max_history = 128,
	max_hosts = 256,
	history_none = 0xFF,
	max_payload = 65535,
	record_len_size = 2,
	flag_readmit = 0x8000,
	flag_host_mask = 0x00FF,
	flag_key_phase = 0x4000,
}
local FIELD = {
	version = { off = 0, size = 1 },
	type = { off = 1, size = 1 },
	group = { off = 2, size = 2 },
	sender = { off = 4, size = 1 },
	hist_len = { off = 5, size = 1 },
	payload_len = { off = 6, size = 2 },
	epoch = { off = 8, size = 4 },
	count = { off = 12, size = 2 },
	flags = { off = 14, size = 2 },
	seq = { off = 16, size = 8 },
	tag = { off = 24, size = 8 },
}
local REASON = {
	[0] = "ACCEPT",
	[1] = "DUPLICATE",
	[2] = "GAP",
	[3] = "DIVERGENCE",
	[4] = "FUTURE_EPOCH",
	[5] = "STALE_EPOCH",
	[6] = "MALFORMED",
	[7] = "BAD_VERSION",
	[8] = "BAD_TYPE",
	[9] = "BAD_GROUP",
	[10] = "BAD_SENDER",
	[11] = "BAD_HISTLEN",
	[12] = "BAD_PAYLOAD",
	[13] = "SENDER_IN_HISTORY",
	[14] = "SEQ_TOO_FAR",
	[15] = "BAD_TAG",
	[16] = "HALTED",
	[17] = "BAD_HISTORY_ID",
	[18] = "BAD_FLAGS",
}
-- END wire constants

local R = {}
for code, name in pairs(REASON) do R[name] = code end

local exo = Proto("exo", "Exo atomic broadcast frame")

local f = {
	version = ProtoField.uint8("exo.version", "Version", base.DEC),
	type = ProtoField.uint8("exo.type", "Type", base.DEC, { [WIRE.type_data] = "DATA" }),
	group = ProtoField.uint16("exo.group", "Group", base.DEC),
	sender = ProtoField.uint8("exo.sender", "Sender", base.DEC),
	hist_len = ProtoField.uint8("exo.hist_len", "History length", base.DEC),
	payload_len = ProtoField.uint16("exo.payload_len", "Payload length", base.DEC),
	epoch = ProtoField.uint32("exo.epoch", "Epoch", base.DEC),
	count = ProtoField.uint16("exo.count", "Record count", base.DEC),
	flags = ProtoField.uint16("exo.flags", "Flags", base.HEX),
	readmit = ProtoField.bool("exo.flags.readmit", "Readmit", 16, nil, WIRE.flag_readmit),
	readmit_host = ProtoField.uint16("exo.flags.host", "Readmitted host", base.DEC, nil, WIRE.flag_host_mask),
	key_phase = ProtoField.uint16("exo.flags.key_phase", "Key phase", base.DEC, nil, WIRE.flag_key_phase),
	seq = ProtoField.uint64("exo.seq", "Sequence number", base.DEC),
	tag = ProtoField.uint64("exo.tag", "Tag", base.HEX),
	history = ProtoField.bytes("exo.history", "History"),
	history_id = ProtoField.uint8("exo.history.id", "History id", base.DEC),
	payload = ProtoField.bytes("exo.payload", "Payload"),
	record = ProtoField.none("exo.record", "Record"),
	record_len = ProtoField.uint16("exo.record.len", "Record length", base.DEC),
	record_data = ProtoField.bytes("exo.record.data", "Record data"),
	reason = ProtoField.uint8("exo.reason", "Codec verdict", base.DEC, REASON),
}
exo.fields = f

local e = {
	truncated_header = ProtoExpert.new("exo.truncated.header", "Frame shorter than the 32-byte Exo header (MALFORMED)", expert.group.MALFORMED, expert.severity.ERROR),
	truncated_history = ProtoExpert.new("exo.truncated.history", "Frame shorter than its history (MALFORMED)", expert.group.MALFORMED, expert.severity.ERROR),
	truncated_payload = ProtoExpert.new("exo.truncated.payload", "payload_len runs past the frame (BAD_PAYLOAD)", expert.group.MALFORMED, expert.severity.ERROR),
	bad_version = ProtoExpert.new("exo.bad_version", "Version is not 1 (BAD_VERSION)", expert.group.MALFORMED, expert.severity.ERROR),
	bad_type = ProtoExpert.new("exo.bad_type", "Type is not DATA (BAD_TYPE)", expert.group.MALFORMED, expert.severity.ERROR),
	bad_flags = ProtoExpert.new("exo.bad_flags", "Flags neither 0 nor READMIT | host (BAD_FLAGS)", expert.group.MALFORMED, expert.severity.ERROR),
	bad_histlen = ProtoExpert.new("exo.bad_histlen", "hist_len above 128 (BAD_HISTLEN)", expert.group.MALFORMED, expert.severity.ERROR),
	bad_history_id = ProtoExpert.new("exo.bad_history_id", "History id repeated (BAD_HISTORY_ID)", expert.group.MALFORMED, expert.severity.ERROR),
	bad_records = ProtoExpert.new("exo.bad_records", "Records do not frame count records in payload_len bytes (BAD_PAYLOAD)", expert.group.MALFORMED, expert.severity.ERROR),
}
exo.experts = { e.truncated_header, e.truncated_history, e.truncated_payload, e.bad_version, e.bad_type,
	e.bad_flags, e.bad_histlen, e.bad_history_id, e.bad_records }

-- host_name is a host id as the docs write it: 0 -> A, 25 -> Z, 26 -> AA; X for none.
local function host_name(id)
	if id == WIRE.history_none then return "X" end
	local s, n = "", id + 1
	while n > 0 do
		s = string.char(65 + (n - 1) % 26) .. s
		n = math.floor((n - 1) / 26)
	end
	return s
end

local function valid_flags(fl)
	fl = bit.band(fl, bit.bnot(WIRE.flag_key_phase)) -- the key slot of the tag, either way
	if fl == 0 then return true end
	local readmit = bit.band(fl, WIRE.flag_readmit) ~= 0
	local other = bit.band(fl, bit.bnot(bit.bor(WIRE.flag_readmit, WIRE.flag_host_mask)))
	return readmit and other == 0
end

local function has(len, fd) return len >= fd.off + fd.size end

function exo.dissector(tvb, pinfo, tree)
	local len = tvb:len()
	pinfo.cols.protocol = "Exo"
	local item = tree:add(exo, tvb())
	local verdict = nil -- the first failure, in the codec's order (exo/frame.go)
	local function fail(code) if verdict == nil then verdict = code end end

	-- 1. version (and at least 1 byte)
	if len < 1 then
		item:add_proto_expert_info(e.truncated_header)
		fail(R.MALFORMED)
	end
	local fields = { "version", "type", "group", "sender", "hist_len", "payload_len", "epoch", "count", "flags", "seq", "tag" }
	local v = {}
	for _, name in ipairs(fields) do
		local fd = FIELD[name]
		if has(len, fd) then
			local r = tvb(fd.off, fd.size)
			local it = item:add(f[name], r)
			if name == "seq" or name == "tag" then
				v[name] = r:uint64()
			else
				v[name] = r:uint()
			end
			if name == "sender" then
				it:append_text(" (" .. host_name(v.sender) .. ")")
			elseif name == "flags" then
				it:add(f.key_phase, r)
				it:add(f.readmit, r)
				if bit.band(v.flags, WIRE.flag_readmit) ~= 0 then
					it:add(f.readmit_host, r)
				end
				if not valid_flags(v.flags) then it:add_proto_expert_info(e.bad_flags) end
			elseif name == "version" and v.version ~= WIRE.version then
				it:add_proto_expert_info(e.bad_version)
				fail(R.BAD_VERSION)
			elseif name == "type" and v.type ~= WIRE.type_data then
				it:add_proto_expert_info(e.bad_type)
			elseif name == "hist_len" and v.hist_len > WIRE.max_history then
				it:add_proto_expert_info(e.bad_histlen)
			end
		end
	end
	-- 2..5: header length, type, flags, hist_len
	if len < WIRE.header_len then
		if len >= 1 then item:add_proto_expert_info(e.truncated_header) end
		fail(R.MALFORMED)
		pinfo.cols.info = "Exo, truncated header (" .. len .. " bytes) [" .. REASON[verdict] .. "]"
		item:add(f.reason, verdict):set_generated()
		return len
	end
	if v.type ~= WIRE.type_data then fail(R.BAD_TYPE) end
	if not valid_flags(v.flags) then fail(R.BAD_FLAGS) end
	if v.hist_len > WIRE.max_history then fail(R.BAD_HISTLEN) end

	-- 6. the history
	local hstart = WIRE.header_len
	local hl = v.hist_len
	local hpresent = math.min(hl, len - hstart)
	local names = {}
	if hl > 0 then
		local ht = item:add(f.history, tvb(hstart, math.max(hpresent, 0)))
		local seen = {}
		local repeated = false
		for i = 0, hpresent - 1 do
			local id = tvb(hstart + i, 1):uint()
			local it = ht:add(f.history_id, tvb(hstart + i, 1))
			it:append_text(" (" .. host_name(id) .. ")")
			names[#names + 1] = host_name(id)
			if id ~= WIRE.history_none then
				if seen[id] then
					it:add_proto_expert_info(e.bad_history_id)
					repeated = true
				end
				seen[id] = true
			end
		end
		ht:append_text(": [" .. table.concat(names, " ") .. "]")
		if hpresent < hl then
			ht:add_proto_expert_info(e.truncated_history, "Frame shorter than its history: " .. hpresent .. " of " .. hl .. " ids (MALFORMED)")
			fail(R.MALFORMED)
		end
		-- 7. the payload within the frame comes before repeated ids
		if hpresent == hl and len < hstart + hl + v.payload_len then fail(R.BAD_PAYLOAD) end
		if repeated then fail(R.BAD_HISTORY_ID) end
	end

	-- the payload: count records [len u16][len bytes] in payload_len bytes
	local pstart = hstart + hl
	local pl = v.payload_len
	local consumed = math.min(pstart + pl, len)
	if pstart <= len then
		local ppresent = math.min(pl, len - pstart)
		if ppresent < pl then
			item:add_proto_expert_info(e.truncated_payload, "payload_len " .. pl .. " runs past the frame: " .. ppresent .. " bytes (BAD_PAYLOAD)")
			fail(R.BAD_PAYLOAD)
		end
		local pt = item
		if pl > 0 then pt = item:add(f.payload, tvb(pstart, ppresent)) end
		local off, n = pstart, 0
		local pend = pstart + ppresent
		local framing_ok = ppresent == pl
		while n < v.count do
			if pend - off < WIRE.record_len_size then
				framing_ok = false
				break
			end
			local rlen = tvb(off, WIRE.record_len_size):uint()
			local avail = math.min(rlen, pend - off - WIRE.record_len_size)
			local rt = pt:add(f.record, tvb(off, WIRE.record_len_size + avail))
			rt:append_text(" " .. n .. ": " .. rlen .. " bytes")
			rt:add(f.record_len, tvb(off, WIRE.record_len_size))
			if avail > 0 then rt:add(f.record_data, tvb(off + WIRE.record_len_size, avail)) end
			if avail < rlen then
				rt:add_proto_expert_info(e.bad_records, "Record " .. n .. " of " .. rlen .. " bytes runs past payload_len (BAD_PAYLOAD)")
				framing_ok = false
				break
			end
			off = off + WIRE.record_len_size + rlen
			n = n + 1
		end
		if framing_ok and off ~= pend then
			pt:add_proto_expert_info(e.bad_records, (pend - off) .. " bytes after " .. v.count .. " records (BAD_PAYLOAD)")
			framing_ok = false
		elseif not framing_ok and n < v.count and ppresent == pl then
			pt:add_proto_expert_info(e.bad_records, "Only " .. n .. " of " .. v.count .. " records in payload_len " .. pl .. " (BAD_PAYLOAD)")
		end
		if not framing_ok then fail(R.BAD_PAYLOAD) end
	end

	if verdict == nil then verdict = R.ACCEPT end
	item:add(f.reason, verdict):set_generated()
	item:set_len(consumed)
	item:append_text(", Seq: " .. tostring(v.seq) .. ", Sender: " .. host_name(v.sender))
	local info = string.format("Exo seq=%s sender=%s epoch=%d group=%d history=[%s] records=%d",
		tostring(v.seq), host_name(v.sender), v.epoch, v.group, table.concat(names, " "), v.count)
	if v.flags ~= 0 and valid_flags(v.flags) then
		info = info .. " readmit=" .. host_name(bit.band(v.flags, WIRE.flag_host_mask))
	end
	if verdict ~= R.ACCEPT then info = info .. " [" .. REASON[verdict] .. "]" end
	pinfo.cols.info = info
	-- The bytes after the frame are Ethernet padding: returning the
	-- frame's length leaves them to Wireshark (eth.padding).
	return consumed
end

DissectorTable.get("ethertype"):add(WIRE.ether_type, exo)
