package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/plantgate/plantgate/host/redis"
)

// nginxModules are where Debian's libnginx-mod-http-lua puts the Lua module
// and the NDK it needs; the config loads them by absolute path, so the
// system's modules-enabled is not read.
var nginxModules = []string{"/usr/lib/nginx/modules/ndk_http_module.so", "/usr/lib/nginx/modules/ngx_http_lua_module.so"}

// nginxConf is the nginx + Lua peer (issue 22): what Kong and OpenResty are
// built on, written the way a user would for this API. Debian's nginx with
// libnginx-mod-http-lua, lua-cjson and lua-nginx-redis (resty.redis as
// "nginx.redis", pooled cosockets), 2 workers, keepalive, no access log;
// the bearer compared to one token, plant-rules' checks with its defaults,
// the gateway's create script (EVALSHA, EVAL on NOSCRIPT) and a read with
// one GET, under the keys the Fiber peer uses (peerfiber.go).
//
// Known differences from the gateway, none met by the benchmark's bodies:
// cjson reads numbers as doubles, so ids beyond 2^53 lose precision (the
// index member is written for 1 ≤ id < 2^60); trimming removes ASCII
// white space only; a "tag": null is refused rather than read as no tag.
var nginxConf = template.Must(template.New("nginx").Parse(`
{{range .Modules}}load_module {{.}};
{{end}}
worker_processes 2;
daemon off;
master_process on;
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path {{.Dir}}/body;
  proxy_temp_path {{.Dir}}/proxy;
  fastcgi_temp_path {{.Dir}}/fastcgi;
  uwsgi_temp_path {{.Dir}}/uwsgi;
  scgi_temp_path {{.Dir}}/scgi;
  client_body_buffer_size 16k;
  client_max_body_size 1m;
  keepalive_timeout 60s;
  keepalive_requests 1000000;
  lua_package_path "/usr/share/lua/5.1/?.lua;;";
  init_by_lua_block {
    cjson = require "cjson.safe"
    redis = require "nginx.redis"
    AUTH = "Bearer {{.Token}}"
    SHA, SCRIPT = "{{.SHA}}", [==[{{.Script}}]==]
    PREFIX, INDEX, EVENTS, REC = "peer:plant:", "peer:index", "peer:events", "peer:events:on"

    function fail(status, code, msg)
      ngx.status = status
      ngx.header["Content-Type"] = "application/json"
      ngx.print('{"error":' .. code .. ',"message":' .. cjson.encode(msg) .. '}')
    end

    function connect()
      local red = redis:new()
      red:set_timeouts(1000, 1000, 1000)
      local ok, err = red:connect("127.0.0.1", {{.RedisPort}})
      if not ok then return nil, err end
      return red
    end

    -- code points: every byte that is not a UTF-8 continuation byte
    local function count(s)
      local _, n = s:gsub("[^\128-\191]", "")
      return n
    end

    -- plant-rules' check of one field: control characters (C0, DEL, C1)
    -- first, then the length after trimming
    function check(field, s, max, code_len, code_ctl)
      local i = s:find("[%z\1-\31\127]")
      local j = s:find("\194[\128-\159]")
      if j and (not i or j < i) then i = j end
      if i then
        local cp = s:byte(i)
        if cp == 194 then cp = s:byte(i + 1) end
        return code_ctl, string.format("%s must not contain control characters, found U+%04X at character %d",
          field, cp, count(s:sub(1, i - 1)) + 1)
      end
      local n = count(s:match("^%s*(.-)%s*$"))
      if n < 1 or n > max then
        return code_len, string.format("%s must be 1–%d characters after trimming, got %d", field, max, n)
      end
    end
  }
  server {
    listen {{.Listen}};
    location = /plants {
      content_by_lua_block {
        if ngx.var.http_authorization ~= AUTH then return fail(401, 40151, "invalid token") end
        ngx.req.read_body()
        local body = ngx.req.get_body_data()
        local p = body and cjson.decode(body)
        if type(p) ~= "table" or type(p.id) ~= "number" or p.id ~= math.floor(p.id) or type(p.name) ~= "string"
            or (p.tag ~= nil and type(p.tag) ~= "string") then
          return fail(400, 40000, 'body must be a NewPlant: {"id": int64, "name": string, "tag"?: string}')
        end
        local id = string.format("%d", p.id)
        if p.id < 1 then return fail(400, 40050, "id must be at least 1, got " .. id) end
        local code, msg = check("name", p.name, 100, 40051, 40052)
        if not code and p.tag ~= nil then code, msg = check("tag", p.tag, 50, 40053, 40054) end
        if code then return fail(400, code, msg) end
        local out = '{"name":' .. cjson.encode(p.name) .. (p.tag and (',"tag":' .. cjson.encode(p.tag)) or '') .. '}'
        local content = '{"id":' .. id .. ',' .. out:sub(2)
        local member = string.format("8%015x", p.id)
        local now = string.format("%d", ngx.now() * 1000)
        local red = connect()
        if not red then return fail(503, 50301, "plant store unavailable") end
        local res, err = red:evalsha(SHA, 4, PREFIX .. id, INDEX, EVENTS, REC, content, member, now)
        if not res and err and err:find("NOSCRIPT", 1, true) then
          res, err = red:eval(SCRIPT, 4, PREFIX .. id, INDEX, EVENTS, REC, content, member, now)
        end
        if not res then red:close() return fail(503, 50301, "plant store unavailable") end
        red:set_keepalive(60000, 64)
        if res < 0 then return fail(409, 40003, "plant " .. id .. " already exists with other content") end
        ngx.header["Content-Type"] = "application/json"
        ngx.print(out)
      }
    }
    location ~ ^/plants/(-?[0-9]+)$ {
      content_by_lua_block {
        if ngx.var.http_authorization ~= AUTH then return fail(401, 40151, "invalid token") end
        local id = ngx.var[1]
        local red = connect()
        if not red then return fail(503, 50301, "plant store unavailable") end
        local content, err = red:get(PREFIX .. id)
        if not content then red:close() return fail(503, 50301, "plant store unavailable") end
        red:set_keepalive(60000, 64)
        if content == ngx.null then return fail(404, 40402, "no plant with id " .. id) end
        ngx.header["Content-Type"] = "application/json"
        ngx.print(content)
      }
    }
    location = /healthz { return 200 "ok"; }
  }
}
`))

// startNginxPeer renders the peer's config into dir/nginx and starts nginx
// on a free port against the redis-server at redisAddr, with its workers'
// pids recorded for the CPU figures. The caller stops it.
func startNginxPeer(ctx context.Context, nginx, dir, redisAddr, token string) (*proc, error) {
	for _, m := range nginxModules {
		if _, err := os.Stat(m); err != nil {
			return nil, fmt.Errorf("nginx + Lua peer: %w (apt-get install nginx libnginx-mod-http-lua lua-cjson lua-nginx-redis)", err)
		}
	}
	ndir := filepath.Join(dir, "nginx")
	// 0755: the workers may run as another user (nobody, when started as root).
	if err := os.MkdirAll(ndir, 0o755); err != nil {
		return nil, err
	}
	_ = os.Chmod(dir, 0o755)
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	_, redisPort, _ := strings.Cut(redisAddr, ":")
	script := redis.CreatePlantLua()
	sum := sha1.Sum([]byte(script))
	var b strings.Builder
	if err := nginxConf.Execute(&b, map[string]any{
		"Modules": nginxModules, "Dir": ndir, "Listen": "127.0.0.1:" + port, "Token": token,
		"SHA": hex.EncodeToString(sum[:]), "Script": script, "RedisPort": redisPort,
	}); err != nil {
		return nil, err
	}
	conf := filepath.Join(ndir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	p := &proc{addr: "127.0.0.1:" + port}
	p.cmd = exec.CommandContext(ctx, nginx, "-p", ndir, "-c", conf, "-e", filepath.Join(ndir, "error.log"))
	out, err := os.Create(filepath.Join(ndir, "stderr.log"))
	if err != nil {
		return nil, err
	}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start nginx: %w", err)
	}
	if err := waitReady(ctx, "http://"+p.addr+"/healthz", 10*time.Second); err != nil {
		p.stop()
		log, _ := os.ReadFile(filepath.Join(ndir, "error.log"))
		return nil, fmt.Errorf("nginx + Lua peer: %w\n%s", err, log)
	}
	// The workers are the master's children; they live as long as it does.
	deadline := time.Now().Add(5 * time.Second)
	for len(p.children) < 2 && time.Now().Before(deadline) {
		p.children = childPids(p.pid())
		time.Sleep(10 * time.Millisecond)
	}
	if len(p.children) < 2 {
		p.stop()
		return nil, fmt.Errorf("nginx + Lua peer: %d workers, want 2", len(p.children))
	}
	return p, nil
}

// childPids lists the processes whose parent is pid, from /proc.
func childPids(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}
